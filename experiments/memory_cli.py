"""`critiquelab memory …`: see and curate what the agents learned (a thin layer over
:class:`pipelines.memory.bank.MemoryBank`)."""

from __future__ import annotations

import argparse
import datetime
from typing import Any

from core.errors import UserError
from experiments.paths import data_dir
from pipelines.memory.bank import MemoryBank, memory_dir
from pipelines.memory.config import DEFAULT_COLLECTION
from pipelines.memory.consolidation import DUPLICATE_DISTANCE, consolidate
from pipelines.memory.entries import MEMORY_TYPES


def add_memory_parser(commands: Any) -> None:
    memory = commands.add_parser(
        "memory", help="what the agents learned: search, skills, proposals, curation"
    )
    verbs = memory.add_subparsers(dest="memory_command", required=True, parser_class=type(memory))
    search = verbs.add_parser("search", help="entries most similar to TEXT")
    search.add_argument("text")
    search.add_argument("--k", type=int, default=10, help="how many (default 10)")
    search.add_argument("--role", help="only entries about this role")
    search.add_argument("--type", help=f"only this type: {', '.join(MEMORY_TYPES)}")
    skills = verbs.add_parser("skills", help="the skills library, most confident first")
    skills.add_argument("--role", help="only skills for this role")
    proposals = verbs.add_parser("proposals", help="entries proposed to other roles, pending approval")
    proposals.add_argument("--all", action="store_true", help="decided ones too")
    for verb in ("approve", "reject"):
        decide = verbs.add_parser(verb, help=f"{verb} a proposal (p-…) or a skill (s-…)")
        decide.add_argument("id")
    merge = verbs.add_parser("consolidate", help="merge near-duplicates, decay stale entries")
    merge.add_argument("--threshold", type=float, default=DUPLICATE_DISTANCE,
                       help=f"cosine distance of near-duplicates (default {DUPLICATE_DISTANCE})")
    merge.add_argument("--stale-days", type=float,
                       help="decay entries neither written nor recalled for this long")
    forget = verbs.add_parser("forget", help="delete entries created before a date")
    forget.add_argument("--before", required=True, help="YYYY-MM-DD (UTC)")
    for verb in verbs.choices.values():
        verb.add_argument("--store", default=DEFAULT_COLLECTION,
                          help=f"memory store, a spec's memory.store (default {DEFAULT_COLLECTION})")


def _bank(store: str) -> MemoryBank:
    home = data_dir()
    if not (memory_dir(home) / "chroma").exists():
        raise UserError(f"no memory in {home} yet (a run with `memory: {{enabled: true}}` writes it)")
    bank = MemoryBank(home, collection=store)
    if bank.episodic.count() == 0:
        bank.close()
        raise UserError(f"memory store '{store}' in {home} is empty")
    return bank


def _when(stamp: float) -> str:
    if not stamp:
        return "never"
    return datetime.datetime.fromtimestamp(stamp, datetime.UTC).strftime("%Y-%m-%d %H:%M")


def _one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def cmd_memory(args: argparse.Namespace) -> int:
    if args.memory_command == "search" and args.type is not None and args.type not in MEMORY_TYPES:
        raise UserError(f"memory search --type '{args.type}' is unknown; allowed: {', '.join(MEMORY_TYPES)}")
    if args.memory_command == "search" and not 1 <= args.k <= 1000:
        raise UserError(f"memory search --k must be between 1 and 1000 (got {args.k})")
    cutoff = 0.0
    if args.memory_command == "forget":
        try:
            day = datetime.datetime.strptime(args.before, "%Y-%m-%d")
            cutoff = day.replace(tzinfo=datetime.UTC).timestamp()
        except ValueError as exc:
            raise UserError(f"memory forget --before '{args.before}' is not a date YYYY-MM-DD") from exc
    if args.memory_command == "consolidate" and not 0 < args.threshold < 1:
        raise UserError(f"memory consolidate --threshold must be between 0 and 1 (got {args.threshold})")
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
            print(f"forgot {bank.episodic.forget_before(cutoff)} entries created before {args.before}")
    return 0

