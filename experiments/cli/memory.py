"""`critiquelab memory …`: see and curate what the agents learned (a thin layer over
:class:`critiquelab.runtime.memory.bank.MemoryBank`)."""

from __future__ import annotations

import argparse
import datetime
import math
from typing import Any

from critiquelab.core.errors import UserError
from critiquelab.experiments.cli.arg_types import int_between
from critiquelab.experiments.paths import data_dir
from critiquelab.runtime.memory.bank import MemoryBank, memory_dir
from critiquelab.runtime.memory.config import DEFAULT_COLLECTION, STORE_NAME
from critiquelab.runtime.memory.consolidation import DUPLICATE_DISTANCE, consolidate
from critiquelab.runtime.memory.entries import MEMORY_TYPES
from critiquelab.runtime.memory.episodic import stored_collections


def _text(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("expected some text to search for")
    return value


def _fraction(value: str) -> float:
    number = _positive(value)
    if not number < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (got {value})")
    return number


def _positive(value: str) -> float:
    try:
        number = float(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a number, got '{value}'") from exc
    if not math.isfinite(number) or number <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number above 0 (got {value})")
    return number


def _day(value: str) -> float:
    """A date, YYYY-MM-DD (UTC), as the timestamp of its start."""
    try:
        day = datetime.datetime.strptime(value, "%Y-%m-%d")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"'{value}' is not a date YYYY-MM-DD") from exc
    return day.replace(tzinfo=datetime.UTC).timestamp()


def _store(value: str) -> str:
    if not STORE_NAME.fullmatch(value):
        raise argparse.ArgumentTypeError(f"'{value}' is no store name (letters, digits, '.', '_', '-'; "
                                         "3 to 62 characters, a letter or digit at each end)")
    return value


def _decision_id(value: str) -> str:
    if not value.startswith(("p-", "s-")):
        raise argparse.ArgumentTypeError(f"'{value}' is neither a proposal (p-…) nor a skill (s-…)")
    return value


def _role(value: str) -> str:
    from critiquelab.pipelines.registry import describe_pipelines

    roles = sorted({role for pipeline in describe_pipelines() for role in pipeline["roles"]})
    if value not in roles:
        raise argparse.ArgumentTypeError(f"unknown role '{value}'; roles: {', '.join(roles)}")
    return value


def add_memory_parser(commands: Any) -> None:
    """Every argument is checked by its type, before any memory store is opened."""
    memory = commands.add_parser(
        "memory", help="what the agents learned: search, skills, proposals, curation"
    )
    verbs = memory.add_subparsers(dest="memory_command", required=True, parser_class=type(memory))
    search = verbs.add_parser("search", help="entries most similar to TEXT")
    search.add_argument("text", type=_text)
    search.add_argument("--k", type=int_between(1, 1000), default=10, help="how many, 1 to 1000 (default 10)")
    search.add_argument("--role", type=_role, help="only entries about this role")
    search.add_argument("--type", choices=MEMORY_TYPES, help="only entries of this type")
    skills = verbs.add_parser("skills", help="the skills library, most confident first")
    skills.add_argument("--role", type=_role, help="only skills for this role")
    proposals = verbs.add_parser("proposals", help="entries proposed to other roles, pending approval")
    proposals.add_argument("--all", action="store_true", help="decided ones too")
    for verb in ("approve", "reject"):
        decide = verbs.add_parser(verb, help=f"{verb} a proposal (p-…) or a skill (s-…)")
        decide.add_argument("id", type=_decision_id)
    merge = verbs.add_parser("consolidate", help="merge near-duplicates, decay stale entries")
    merge.add_argument("--threshold", type=_fraction, default=DUPLICATE_DISTANCE,
                       help=f"cosine distance of near-duplicates, 0 to 1 (default {DUPLICATE_DISTANCE})")
    merge.add_argument("--stale-days", type=_positive,
                       help="decay entries neither written nor recalled for this long")
    forget = verbs.add_parser("forget", help="delete entries created before a date")
    forget.add_argument("--before", required=True, type=_day, help="YYYY-MM-DD (UTC)")
    for verb in verbs.choices.values():
        verb.add_argument("--store", type=_store, default=DEFAULT_COLLECTION,
                          help=f"memory store, a spec's memory.store (default {DEFAULT_COLLECTION})")


def _bank(store: str) -> MemoryBank:
    """The memory bank of ``store``; an unknown or empty store is refused before any client opens
    it (an open would write to the store)."""
    home = data_dir()
    chroma = memory_dir(home) / "chroma"
    if not chroma.exists():
        raise UserError(f"no memory in {home} yet (a run with `memory: {{enabled: true}}` writes it)")
    stores = stored_collections(chroma)
    if store not in stores:
        known = ", ".join(sorted(stores)) or "none"
        raise UserError(f"no memory store '{store}' in {home} (stores there: {known})")
    if stores[store] == 0:
        raise UserError(f"memory store '{store}' in {home} is empty")
    return MemoryBank(home, collection=store)


def _when(stamp: float) -> str:
    if not stamp:
        return "never"
    return datetime.datetime.fromtimestamp(stamp, datetime.UTC).strftime("%Y-%m-%d %H:%M")


def _one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def cmd_memory(args: argparse.Namespace) -> int:
    with _bank(args.store) as bank:
        if args.memory_command == "search":
            for hit in bank.search(args.text, k=args.k, role=args.role, type=args.type):
                e = hit.entry
                flag = " (deprecated)" if e.deprecated else ""
                print(f"{e.id}  {hit.distance:.3f}  {e.role:<8} {e.type:<16} {e.task_id:<16} "
                      f"recalled {e.retrieval_count}x{flag}\n    {_one_line(e.content)}")
        elif args.memory_command == "skills":
            for s in bank.skills.list(role=args.role):
                state = "approved" if s.approved else "pending"
                print(f"{s.id}  {s.role:<8} {s.category:<16} {state:<8}  confidence {s.confidence:.2f} "
                      f"({s.times_succeeded}/{s.times_used} uses)  from {', '.join(s.source_task_ids)}\n"
                      f"    {_one_line(s.template)}")
        elif args.memory_command == "proposals":
            for p in bank.proposals.list(None if args.all else "pending"):
                print(f"{p.id}  {p.from_role} -> {p.to_role}  {p.status:<8} {_when(p.created_at)}  "
                      f"entry {p.entry_id}\n"
                      f"    {_one_line(p.summary)}")
        elif args.memory_command in ("approve", "reject"):
            bank.decide(args.id, approve=args.memory_command == "approve")
            print(f"{args.id}: {args.memory_command}d")
        elif args.memory_command == "consolidate":
            report = consolidate(bank.episodic, threshold=args.threshold, stale_days=args.stale_days)
            print(f"{report.entries} entries, {report.active_before} active: merged {report.merged}, decayed "
                  f"{report.decayed}; {report.active_after} active now; redundancy "
                  f"{report.redundancy_before:.2f} -> {report.redundancy_after:.2f}")
        elif args.memory_command == "forget":
            day = datetime.datetime.fromtimestamp(args.before, datetime.UTC).date()
            print(f"forgot {bank.episodic.forget_before(args.before)} entries created before {day}")
    return 0

