"""`mbfg check <config.yaml>`: validate a rig and print a summary a person can read."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from mbfg_ros.model.summary import summarize, format_summary


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="mechanism config (YAML)")
    p.add_argument("--json", metavar="FILE", help="also write the facts as JSON to FILE ('-' = stdout)")


def run(args: argparse.Namespace) -> int:
    facts = summarize(args.config)
    if args.json == "-":
        print(json.dumps(facts, indent=2))
        return 0
    print(format_summary(facts))
    if args.json:
        Path(args.json).write_text(json.dumps(facts, indent=2) + "\n")
    return 0
