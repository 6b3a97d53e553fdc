"""Write docker/airflow.env from docker/airflow.env.example with fresh secrets (standard library only).

Every `<generate>` value becomes a new random secret (a Fernet key for AIRFLOW__CORE__FERNET_KEY), then every
`<NAME>` inside a value becomes NAME's value, so the database URL carries the generated Postgres password.
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
GENERATE = "<generate>"
REFERENCE = re.compile(r"<([A-Z][A-Z0-9_]*)>")


def new_secret(name: str) -> str:
    """A random value fit for the variable: Fernet wants exactly 32 url-safe base64 bytes, the rest url-safe text."""
    if name == "AIRFLOW__CORE__FERNET_KEY":
        return base64.urlsafe_b64encode(os.urandom(32)).decode()
    return secrets.token_urlsafe(32)


def render(example: str) -> str:
    """The example's text with every placeholder filled; comments and layout kept."""
    lines = example.splitlines()
    settings = [line.split("=", 1) for line in lines if "=" in line and not line.startswith("#")]
    values = {name: new_secret(name) if value == GENERATE else value for name, value in settings}
    missing = sorted({ref for value in values.values() for ref in REFERENCE.findall(value)} - set(values))
    if missing:
        raise SystemExit(f"airflow.env.example: {', '.join(missing)} referenced but not defined")
    out = []
    for line in lines:
        if "=" in line and not line.startswith("#"):
            name = line.split("=", 1)[0]
            out.append(f"{name}={REFERENCE.sub(lambda m: values[m.group(1)], values[name])}")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", type=Path, default=HERE / "airflow.env.example")
    parser.add_argument("--output", type=Path, default=HERE / "airflow.env")
    args = parser.parse_args(argv)
    if args.output.exists():
        print(f"{args.output} exists; remove it first to replace its secrets", file=sys.stderr)
        return 2
    args.output.write_text(render(args.example.read_text()))
    args.output.chmod(0o600)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
