"""Write docker/airflow.env, postgres.env and kafka.env from their examples with fresh secrets (standard library only).

Every `<generate>` value becomes a new random secret (a Fernet key for AIRFLOW__CORE__FERNET_KEY), then every
`<NAME>` inside a value becomes NAME's value from any of the files, so airflow.env's database URL carries the
Postgres password generated for postgres.env. Each service of compose.yaml reads only the files it needs.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import secrets
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = ("airflow.env", "postgres.env", "kafka.env")
GENERATE = "<generate>"
REFERENCE = re.compile(r"<([A-Z][A-Z0-9_]*)>")


def new_secret(name: str) -> str:
    """A random value fit for the variable: Fernet wants exactly 32 url-safe base64 bytes, the rest url-safe text."""
    if name == "AIRFLOW__CORE__FERNET_KEY":
        return base64.urlsafe_b64encode(os.urandom(32)).decode()
    return secrets.token_urlsafe(32)


def settings(text: str) -> list[tuple[str, str]]:
    """The `NAME=value` lines of an env file (comments skipped)."""
    lines = text.splitlines()
    return [(n, v) for n, v in (line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))]


def render_all(examples: dict[str, str]) -> dict[str, str]:
    """Each example's text with every placeholder filled from the values of all of them; comments and layout kept."""
    values = {n: new_secret(n) if v == GENERATE else v for text in examples.values() for n, v in settings(text)}
    missing = sorted({ref for value in values.values() for ref in REFERENCE.findall(value)} - set(values))
    if missing:
        raise SystemExit(f"env examples: {', '.join(missing)} referenced but not defined")
    rendered = {}
    for name, text in examples.items():
        out = []
        for line in text.splitlines():
            if "=" in line and not line.startswith("#"):
                key = line.split("=", 1)[0]
                out.append(f"{key}={REFERENCE.sub(lambda m: values[m.group(1)], values[key])}")
            else:
                out.append(line)
        rendered[name] = "\n".join(out) + "\n"
    return rendered


def render(example: str) -> str:
    """One example on its own (every reference defined in it)."""
    return render_all({"env": example})["env"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=Path, default=HERE, help="directory of the *.env.example files")
    parser.add_argument("--output", type=Path, default=HERE, help="directory the env files are written to")
    args = parser.parse_args(argv)
    targets = {name: args.output / name for name in FILES}
    existing = [str(path) for path in targets.values() if path.exists()]
    if existing:
        print(f"{', '.join(existing)} exist; remove them first to replace their secrets", file=sys.stderr)
        return 2
    rendered = render_all({name: (args.examples / f"{name}.example").read_text() for name in FILES})
    for name, path in targets.items():
        # Created readable by its owner only, never briefly by anyone else.
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
            out.write(rendered[name])
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
