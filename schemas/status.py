"""The life of a generation: the statuses the `generations` table stores and how one moves between them.

    candidate -> approved | rejected    the gate decides (approval off)
    candidate -> gated | rejected       the gate passes or fails it (approval on) ...
    gated     -> approved | rejected    ... and a reviewer decides
    approved  -> superseded             a newer generation of the same group was approved
    candidate -> abandoned              its run ended without publishing it (a later run marks it, saying why)

Stored as the plain strings below, so tables written before this enum read the same.
"""

from __future__ import annotations

from enum import StrEnum


class GenerationStatus(StrEnum):
    CANDIDATE = "candidate"
    GATED = "gated"
    APPROVED = "approved"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"
    ABANDONED = "abandoned"
