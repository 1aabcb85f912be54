"""The ``reprobook`` command: list, run, book, toc, bench."""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .chapters import ChapterError, discover, select
from .profiles import PROFILES, SMOKE, ParameterError, parse_override

# In a log (CI, a batch job) tables get room for full chapter names instead of 80 columns.
_WIDTH = None if sys.stdout.isatty() else 140
console = Console(highlight=False, width=_WIDTH)
err = Console(stderr=True, highlight=False, width=_WIDTH)

_STATUS_STYLE = {"ok": "green", "cached": "green", "error": "red", "timeout": "red"}


def _verdict_summary(verdicts: dict) -> str:
    # a volatile (timing) claim's expected verdict may be a list of the verdicts it allows
    vals = [" or ".join(v) if isinstance(v, list) else v for v in verdicts.values()]
    return ", ".join(f"{vals.count(v)} {v}" for v in dict.fromkeys(vals)) or "—"


def cmd_list(args) -> int:
    from .publish import load_published
    from .runner import load_outcome

    t = Table(title="reprobook chapters")
    for col in ("chapter", "part", "tier", "profiles", "expected at smoke", "last result",
                "published"):
        t.add_column(col)
    for ch in discover():
        last, pub = [], []
        for p in PROFILES:
            o = load_outcome(ch, p)
            if o:
                tag = o.status if o.failed else _verdict_summary(o.verdicts)
                last.append(f"{p}: {tag} ({(o.finished or '')[:10]})")
            r = load_published(ch, p) if p != SMOKE else None
            if r:
                state = f"[yellow]stale: {'; '.join(r.stale)}[/]" if r.stale else "current"
                pub.append(f"{p}: {_verdict_summary(r.verdicts)} "
                           f"({(r.data.get('published') or '')[:10]}, {state})")
        t.add_row(ch.slug, ch.part, ch.paper.tier, ", ".join(ch.profile_names),
                  _verdict_summary(ch.expected), "\n".join(last) or "never run",
                  "\n".join(pub) or "—")
    console.print(t)
    return 0


def _overrides(pairs: list[str]) -> dict:
    return dict(parse_override(p) for p in pairs or [])


def cmd_run(args) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .runner import run_chapters

    chapters = select(args.slugs, part=args.part, all_=args.all)
    if args.stale:
        from .publish import load_published

        if args.profile == SMOKE:
            err.print("[red]error:[/] --stale selects chapters whose published result (cpu, gpu) "
                      "is missing or out of date: use it with --profile cpu or gpu")
            return 2
        chapters = [c for c in chapters if args.profile in c.profile_names and (
            (pub := load_published(c, args.profile)) is None or pub.stale)]
    if not chapters:
        err.print("[yellow]no chapters selected[/]")
        return 0
    overrides = _overrides(args.param)
    for ch in chapters:  # every parameter error before anything runs
        ch.parameters_for(args.profile, overrides)
    if args.publish and (args.profile == SMOKE or overrides):
        err.print("[red]error:[/] --publish writes the faithful results: use it with --profile cpu "
                  "(or gpu) and without -p overrides")
        return 2
    if args.dry_run:
        return _dry_run(chapters, args, overrides)
    where = f"Dask scheduler {args.scheduler}" if args.scheduler else \
        f"{args.jobs or 'all'} local process(es)"
    console.print(f"Running {len(chapters)} chapter(s) at profile [bold]{args.profile}[/] on {where}")
    t0 = time.perf_counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=False) as progress:
        task = progress.add_task("chapters", total=len(chapters))

        def on_start(ch):
            progress.console.print(f"  started  {ch.id}")

        def on_done(o):
            style = _STATUS_STYLE.get(o.status, "red")
            extra = f" ({o.wall_time_s:.1f} s)" if o.wall_time_s and o.status != "cached" else ""
            progress.console.print(f"  [{style}]{o.status:<8}[/] {o.part}/{o.slug}{extra}")
            progress.advance(task)

        outcomes = run_chapters(chapters, args.profile, jobs=args.jobs, timeout=args.timeout,
                                force=args.force, overrides=overrides, scheduler=args.scheduler,
                                on_start=on_start, on_done=on_done, publish=args.publish)
    table = Table(title=f"reprobook run — profile {args.profile} — {time.perf_counter() - t0:.0f} s")
    for col in ("chapter", "status", "verdicts", "time (s)", "memory (MB)"):
        table.add_column(col)
    bad = 0
    for o in outcomes:
        style = _STATUS_STYLE.get(o.status, "red")
        if o.mismatches:
            style = "red"
        table.add_row(f"{o.part}/{o.slug}", f"[{style}]{o.status}[/]", _verdict_summary(o.verdicts),
                      f"{o.wall_time_s:.1f}" if o.wall_time_s else "—",
                      f"{o.peak_memory_mb:.0f}" if o.peak_memory_mb else "—")
    console.print(table)
    for o in outcomes:
        if o.failed:
            bad += 1
            cell = o.cell or {}
            where = f" in cell {cell.get('index')}" if cell else ""
            err.print(f"[red]FAILED[/] {o.part}/{o.slug}: {o.status}{where}: {escape(str(o.error))}")
            if cell.get("source"):
                err.print("  cell source:\n    " + escape(cell["source"][:600]).replace("\n", "\n    "))
            err.print(f"  executed notebook: runs/{o.profile}/{o.part}/{o.slug}.error.ipynb")
        elif o.mismatches:
            bad += 1
            err.print(f"[red]VERDICTS DIFFER[/] {o.part}/{o.slug}: " + escape("; ".join(o.mismatches)))
    if bad:
        err.print(f"[red]{bad} chapter(s) failed or changed verdicts[/]")
    return 1 if bad else 0


def _dry_run(chapters, args, overrides) -> int:
    from .runner import plan

    todo, cached = plan(chapters, args.profile, overrides, args.timeout, args.force)
    t = Table(title=f"reprobook run --dry-run — profile {args.profile}")
    for col in ("chapter", "would", "parameters (beyond the notebook's defaults)"):
        t.add_column(col)
    runs = {j.chapter.slug: j for j in todo}
    for ch in chapters:
        params = ch.parameters_for(args.profile, overrides)
        shown = ", ".join(f"{k}={v!r}" for k, v in params.items() if k != "profile") or "—"
        t.add_row(ch.id, "run" if ch.slug in runs else "skip (up to date)", shown)
    console.print(t)
    return 0


def cmd_book(args) -> int:
    from .bookbuild import build_book

    index = build_book(args.profile, strict=not args.no_strict, quiet=args.quiet)
    console.print(f"The book is built. Open: [bold]{index}[/]")
    return 0


def cmd_toc(args) -> int:
    from .toc import render_toc, write_toc

    if args.check:
        from .chapters import book_root

        current = (book_root() / "_toc.yml").read_text()
        if current != render_toc():
            err.print("[red]_toc.yml is out of date: run `reprobook toc`[/]")
            return 1
        console.print("_toc.yml is up to date")
        return 0
    console.print(f"wrote {write_toc()}")
    return 0


def benchmark_names() -> list[str]:
    """The benchmarks of ``reprobook.bench``: its public modules with a ``main(argv)``. The package
    also holds measuring tools that chapters import (FLOP counts, autograd memory), which are not
    benchmarks and are skipped."""
    import reprobook.bench as bench

    names = []
    for m in pkgutil.iter_modules(bench.__path__):
        if not m.name.startswith("_"):
            mod = importlib.import_module(f"reprobook.bench.{m.name}")
            if callable(getattr(mod, "main", None)):
                names.append(m.name)
    return names


def cmd_bench(args) -> int:
    if args.suite != "kernels":
        err.print(f"[red]unknown benchmark suite {args.suite!r}; suites: kernels[/]")
        return 2
    names = benchmark_names()
    if args.only:
        unknown = [n for n in args.only if n not in names]
        if unknown:
            err.print(f"[red]unknown benchmark(s) {unknown}; available: {names}[/]")
            return 2
        names = args.only
    for name in names:
        console.rule(f"bench {name}")
        mod = importlib.import_module(f"reprobook.bench.{name}")
        mod.main(["--quick"] if args.quick else [])
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="reprobook", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("list", help="chapters, profiles, expected verdicts, last results")
    s.set_defaults(fn=cmd_list)

    s = sub.add_parser("run", help="run chapters through papermill")
    s.add_argument("slugs", nargs="*", help="chapter slugs (or part/slug)")
    s.add_argument("--part", help="run every chapter of a part")
    s.add_argument("--all", action="store_true", help="run every chapter")
    s.add_argument("--profile", default=SMOKE, help=f"one of {', '.join(PROFILES)} (default smoke)")
    s.add_argument("--jobs", "-j", type=int, default=None,
                   help="parallel local processes (default: the number of cores)")
    s.add_argument("--timeout", type=int, default=None,
                   help="seconds per chapter (default: the chapter's own, 900 if unset)")
    s.add_argument("--force", action="store_true", help="re-run even if up to date")
    s.add_argument("--scheduler", help="submit to an existing Dask cluster, e.g. tcp://HOST:8786")
    s.add_argument("-p", "--param", action="append", metavar="NAME=VALUE",
                   help="override one parameter (repeatable)")
    s.add_argument("--publish", action="store_true",
                   help="write each finished chapter's result to results/<profile>/ (cpu, gpu)")
    s.add_argument("--stale", action="store_true",
                   help="only the chapters whose published result at --profile is missing or stale")
    s.add_argument("--dry-run", action="store_true",
                   help="check chapters and parameters and show what would run; run nothing")
    s.set_defaults(fn=cmd_run)

    s = sub.add_parser("book", help="build the HTML book from executed notebooks")
    s.add_argument("--profile", default=SMOKE)
    s.add_argument("--no-strict", action="store_true", help="do not treat warnings as errors")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(fn=cmd_book)

    s = sub.add_parser("toc", help="regenerate _toc.yml from the chapters that exist")
    s.add_argument("--check", action="store_true", help="only check that it is up to date")
    s.set_defaults(fn=cmd_toc)

    s = sub.add_parser("bench", help="benchmarks, as ratios measured in one run")
    s.add_argument("suite", help="kernels")
    s.add_argument("--only", nargs="*", help="only these benchmark modules")
    s.add_argument("--quick", action="store_true", help="small sweep, under a minute or so")
    s.set_defaults(fn=cmd_bench)
    return p


def _sigterm_as_interrupt() -> None:
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        def handler(signum, frame):
            raise KeyboardInterrupt
        signal.signal(signal.SIGTERM, handler)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _sigterm_as_interrupt()
    if getattr(args, "jobs", None) is not None and args.jobs < 1:
        err.print("[red]error:[/] --jobs must be at least 1")
        return 2
    if getattr(args, "timeout", None) is not None and args.timeout < 1:
        err.print("[red]error:[/] --timeout must be at least 1 second")
        return 2
    try:
        return args.fn(args)
    except (ChapterError, ParameterError) as e:
        err.print(f"[red]error:[/] {e}")
        return 2
    except KeyboardInterrupt:
        err.print("[yellow]interrupted: finished chapters are kept; run again to resume[/]")
        return 130
    except RuntimeError as e:
        err.print(f"[red]error:[/] {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
