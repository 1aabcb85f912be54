"""The runner: execute chapters through papermill, in parallel, and keep every finished result.

Each chapter runs in a fresh process (``python -m reprobook.book.execute``) in a private temporary
folder, locally or on a Dask worker, so the same function serves both and no shared filesystem is
needed. Results land in ``runs/<profile>/<part>/``:

* ``<slug>.ipynb`` the executed notebook, ``<slug>.ledger.json`` its claims ledger,
* ``<slug>.run.json`` the outcome (status, error, failed cell, time, memory, verdicts, cache key),
  written last: a run killed half-way leaves every finished chapter complete, and the next run
  resumes with the ones that are missing or out of date.

A chapter is up to date when its cache key matches: a hash of the notebook's cells, the parameters
it runs with, the files of the ``reprobook`` modules it imported in its last run (recorded in its
ledger) and the installed environment (package versions). Editing a module no chapter imports
re-runs nothing; editing one it imports re-runs it.

A ledger that breaks the book's rules (a judged claim with no control whose verdict differs, a
claim never recorded) is a failed chapter, named with the claim.
"""
from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

from .atomic import write_text
from .chapters import Chapter, book_root
from ..claims import LEDGER_PATH_ENV, rule_problems
from .execute import PARENT_ENV, STATIC_ENV, failed_cell
from .gluecheck import missing_glue
from .profiles import SMOKE
from .provenance import GIT_COMMIT_ENV, git_commit

__all__ = ["Outcome", "run_chapters", "result_paths", "cache_key", "execute_payload",
           "load_outcome"]

#: Seconds a chapter may use beyond its timeout to start and stop its kernel.
KERNEL_GRACE_S = 30

# Executor processes started by this process, so an interrupted batch can take them down.
_ACTIVE: set[int] = set()
_ACTIVE_LOCK = threading.Lock()
_CANCELLED = threading.Event()


def _kill_active() -> None:
    _CANCELLED.set()
    with _ACTIVE_LOCK:
        pids = list(_ACTIVE)
    for pid in pids:
        _kill_tree(pid)


@dataclass
class Outcome:
    slug: str
    part: str
    profile: str
    status: str                      # ok | cached | error | timeout
    error: str | None = None
    cell: dict | None = None
    wall_time_s: float | None = None
    cpu_time_s: float | None = None          # executor + kernel CPU time (see execute.run_spec)
    load_average: list | None = None         # the machine's 1-minute load at start and end
    peak_memory_mb: float | None = None
    verdicts: dict = field(default_factory=dict)
    volatile: list = field(default_factory=list)   # ids of claims whose numbers are timings
    expected: dict = field(default_factory=dict)
    mismatches: list = field(default_factory=list)
    key: str | None = None
    finished: str | None = None
    where: str = "local"
    modules: list | None = None      # the reprobook files the chapter imported (cache key)
    parameters: dict = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status not in ("ok", "cached")


# ----------------------------------------------------------------------------------- paths, keys
def result_paths(chapter: Chapter, profile: str, root: Path | None = None) -> dict[str, Path]:
    base = book_root(root) / "runs" / profile / chapter.part
    return {"notebook": base / f"{chapter.slug}.ipynb",
            "ledger": base / f"{chapter.slug}.ledger.json",
            "record": base / f"{chapter.slug}.run.json",
            "error_notebook": base / f"{chapter.slug}.error.ipynb"}


#: The ``reprobook`` package folder whose files the cache keys hash (a test may point it elsewhere).
PACKAGE_DIR = Path(__file__).resolve().parents[1]

#: Data files beside an imported module that count as its source (a YAML table, a JSON fixture).
_DATA_SUFFIXES = (".yml", ".yaml", ".json", ".txt", ".csv")


def package_snapshot(package_dir: Path | None = None) -> dict[str, bytes]:
    """The bytes of every source and data file of the package, by path relative to it: what a run
    that starts now will import, kept so that its cache key describes the code it ran even if a
    file is edited while it runs."""
    base = package_dir or PACKAGE_DIR
    return {str(p.relative_to(base)).replace(os.sep, "/"): p.read_bytes()
            for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts
            and (p.suffix == ".py" or p.suffix in _DATA_SUFFIXES)}


def modules_digest(modules: list[str] | None, package_dir: Path | None = None,
                   snapshot: dict[str, bytes] | None = None) -> str:
    """A hash of the given files of the package (paths relative to it) and of the data files in
    their folders, read from disk or from a :func:`package_snapshot`. ``None`` (no run yet) hashes
    to a key no stored result has."""
    if modules is None:
        return "never-run"
    base = package_dir or PACKAGE_DIR
    files = set(modules)
    for m in modules:
        if snapshot is not None:
            folder = m.rpartition("/")[0]
            files.update(rel for rel in snapshot if rel.rpartition("/")[0] == folder
                         and rel.endswith(_DATA_SUFFIXES))
            continue
        folder = (base / m).parent
        if folder.is_dir():
            files.update(str(p.relative_to(base)).replace(os.sep, "/") for p in folder.iterdir()
                         if p.is_file() and p.suffix in _DATA_SUFFIXES)
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode())
        if snapshot is not None:
            data = snapshot.get(rel)
        else:
            p = base / rel
            data = p.read_bytes() if p.is_file() else None
        h.update(data if data is not None else b"<missing>")
    return h.hexdigest()


def _environment_digest() -> str:
    dists = sorted(f"{d.metadata['Name']}=={d.version}".lower() for d in metadata.distributions()
                   if d.metadata["Name"])
    return hashlib.sha256(("\n".join(dists) + sys.version).encode()).hexdigest()


def notebook_digest(path: Path | None = None, text: str | None = None) -> str:
    """A hash of a notebook's cells (types, sources, tags), from its file or its text."""
    nb = json.loads(text if text is not None else path.read_text())
    cells = [(c.get("cell_type"), "".join(c.get("source", "")), c.get("metadata", {}).get("tags"))
             for c in nb.get("cells", [])]
    return hashlib.sha256(json.dumps(cells, sort_keys=True).encode()).hexdigest()


def cache_key(chapter: Chapter, parameters: dict, modules: list[str] | None,
              package_dir: Path | None = None, *, notebook_text: str | None = None,
              snapshot: dict[str, bytes] | None = None) -> str:
    """What a result depends on: notebook cells, parameters, the ``reprobook`` files the chapter
    imported (``modules``, from its last ledger), environment. A finished run passes the notebook
    text and the package snapshot it started from, so editing either while it ran does not make
    its record claim the edited version."""
    nb = (notebook_digest(text=notebook_text) if notebook_text is not None
          else notebook_digest(chapter.notebook))
    parts = {"notebook": nb,
             "parameters": json.dumps(parameters, sort_keys=True),
             "modules": modules_digest(modules, package_dir, snapshot),
             "environment": _environment_digest()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def load_outcome(chapter: Chapter, profile: str, root: Path | None = None) -> Outcome | None:
    rec = result_paths(chapter, profile, root)["record"]
    if not rec.exists():
        return None
    try:
        return Outcome(**json.loads(rec.read_text()))
    except (ValueError, TypeError):
        return None


# ----------------------------------------------------------------------------------- execution
def _kill_tree(pid: int) -> None:
    import psutil

    try:
        parent = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    procs = parent.children(recursive=True) + [parent]
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)


def execute_payload(notebook_text: str, parameters: dict, timeout: int,
                    env_extra: dict | None = None) -> dict:
    """Run one notebook in a fresh process in a private temporary folder; return everything.

    Returns ``{"result": {...}, "notebook": str | None, "ledger": str | None, "log": str}``.
    Used locally by the thread pool and remotely on Dask workers (so it must be self-contained).
    """
    work = Path(tempfile.mkdtemp(prefix="reprobook-"))
    try:
        nb_in, nb_out = work / "chapter.ipynb", work / "executed.ipynb"
        ledger, spec_path, log = work / "ledger.json", work / "spec.json", work / "log.txt"
        nb_in.write_text(notebook_text)
        spec = {"notebook": str(nb_in), "output": str(nb_out), "parameters": parameters,
                "cwd": str(work), "cell_timeout": timeout}
        spec_path.write_text(json.dumps(spec))
        env = {**os.environ, LEDGER_PATH_ENV: str(ledger), STATIC_ENV: "1",
               PARENT_ENV: str(os.getpid()), **(env_extra or {})}
        t0 = time.perf_counter()
        with open(log, "wb") as logf:
            proc = subprocess.Popen([sys.executable, "-m", "reprobook.book.execute", str(spec_path)],
                                    cwd=work, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            with _ACTIVE_LOCK:
                _ACTIVE.add(proc.pid)
            try:
                proc.wait(timeout=timeout + KERNEL_GRACE_S)
                timed_out = False
            except subprocess.TimeoutExpired:
                _kill_tree(proc.pid)
                timed_out = True
            except BaseException:  # interrupted: take the kernel down with us
                _kill_tree(proc.pid)
                raise
            finally:
                with _ACTIVE_LOCK:
                    _ACTIVE.discard(proc.pid)
        res_path = spec_path.with_suffix(".result.json")
        if timed_out:
            result = {"status": "timeout", "error": f"timed out after {timeout} s",
                      "cell": failed_cell(nb_out)}
        elif res_path.exists():
            result = json.loads(res_path.read_text())
            if result["status"] == "timeout":
                result["error"] = f"timed out after {timeout} s ({result['error']})"
        else:
            result = {"status": "error", "cell": failed_cell(nb_out),
                      "error": f"the executor exited with code {proc.returncode} and no result"}
        result["wall_time_s"] = round(time.perf_counter() - t0, 3)
        text = lambda p: p.read_text() if p.exists() else None  # noqa: E731
        logtext = text(log) or ""
        return {"result": result, "notebook": text(nb_out), "ledger": text(ledger),
                "log": logtext[-4000:]}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _finish(job: "_Job", profile: str, payload: dict, where: str, root: Path) -> Outcome:
    """Store a chapter's payload atomically and turn it into an :class:`Outcome`."""
    chapter = job.chapter
    paths = result_paths(chapter, profile, root)
    res = payload["result"]
    out = Outcome(slug=chapter.slug, part=chapter.part, profile=profile, status=res["status"],
                  error=res.get("error"), cell=res.get("cell"), wall_time_s=res.get("wall_time_s"),
                  cpu_time_s=res.get("cpu_time_s"), load_average=res.get("load_average"),
                  expected=dict(chapter.expected) if profile == SMOKE else {}, where=where,
                  finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"), parameters=job.parameters)
    if out.status == "ok" and not payload.get("ledger"):
        out.status, out.error = "error", "the chapter finished without saving its ledger " \
                                         "(call ledger.save() in the last cell)"
    ledger = json.loads(payload["ledger"]) if payload.get("ledger") else None
    if out.status == "ok":
        problems = rule_problems(ledger["claims"])
        unglued = missing_glue(payload["notebook"]) if payload.get("notebook") else []
        if unglued:
            problems.append("the prose refers to glue key(s) no cell glued: " + ", ".join(unglued))
        if problems:  # a chapter that skipped Ledger.save's own check is refused here too
            out.status = "error"
            out.error = "the ledger breaks the book's rules: " + "; ".join(problems)
    if out.status == "ok":
        out.verdicts = {c["id"]: c["verdict"] for c in ledger["claims"]}
        out.volatile = [c["id"] for c in ledger["claims"] if c.get("volatile")]
        out.peak_memory_mb = ledger.get("peak_memory_mb")
        out.modules = ledger.get("modules")
        out.key = cache_key(chapter, job.parameters, out.modules, notebook_text=job.notebook_text,
                            snapshot=job.snapshot)
        write_text(paths["notebook"], payload["notebook"])
        write_text(paths["ledger"], payload["ledger"])
        paths["error_notebook"].unlink(missing_ok=True)
    else:
        if payload.get("notebook"):
            write_text(paths["error_notebook"], payload["notebook"])
        if not out.error and payload.get("log"):
            out.error = payload["log"][-1000:]
        if res.get("traceback"):
            out.error = f"{out.error}\n{res['traceback']}"
    out.mismatches = _mismatches(out)
    job.snapshot = None  # a few MB: not kept once the key is made
    write_text(paths["record"], json.dumps(asdict(out), indent=2))  # last: marks it complete
    return out


def _mismatches(out: Outcome) -> list[str]:
    if out.failed or not out.expected:
        return []
    msgs = []
    for cid, want in out.expected.items():
        got = out.verdicts.get(cid)
        if got is None:
            msgs.append(f"{cid}: expected {want!r}, but the chapter has no such claim")
        elif isinstance(want, list):
            if cid not in out.volatile:
                msgs.append(f"{cid}: the sidecar allows several verdicts {want!r}, but only a "
                            "volatile (timing) claim may have more than one")
            elif got not in want:
                msgs.append(f"{cid}: expected one of {want!r}, got {got!r}")
        elif got != want:
            msgs.append(f"{cid}: expected {want!r}, got {got!r}")
    for cid in out.verdicts:
        if cid not in out.expected:
            msgs.append(f"{cid}: verdict {out.verdicts[cid]!r} has no expected verdict in the "
                        "sidecar")
    return msgs


# ----------------------------------------------------------------------------------- the batch
@dataclass
class _Job:
    chapter: Chapter
    parameters: dict
    key: str
    timeout: int
    notebook_text: str | None = None              # what the run executed (set at launch)
    snapshot: dict | None = field(default=None, repr=False)

    def launch(self) -> str:
        """Read the notebook and snapshot the package as the run starts; return the notebook."""
        self.notebook_text = self.chapter.notebook.read_text()
        self.snapshot = package_snapshot()
        return self.notebook_text


def plan(chapters: list[Chapter], profile: str, overrides: dict | None = None,
         timeout: int | None = None, force: bool = False, root: Path | None = None
         ) -> tuple[list[_Job], list[Outcome]]:
    """Resolve parameters for every chapter (all errors before anything runs) and split the work
    into jobs to run and up-to-date outcomes to reuse."""
    jobs, cached = [], []
    resolved = [(c, c.parameters_for(profile, overrides)) for c in chapters]
    for chapter, params in resolved:
        prev = load_outcome(chapter, profile, root)
        key = cache_key(chapter, params, prev.modules if prev else None)
        paths = result_paths(chapter, profile, root)
        if (not force and prev and prev.status in ("ok", "cached") and prev.key == key
                and paths["notebook"].exists() and paths["ledger"].exists()):
            prev.status = "cached"
            prev.expected = dict(chapter.expected) if profile == SMOKE else {}
            prev.mismatches = _mismatches(prev)
            cached.append(prev)
        else:
            jobs.append(_Job(chapter, params, key, timeout or chapter.timeout))
    return jobs, cached


def run_chapters(chapters: list[Chapter], profile: str = SMOKE, *, jobs: int | None = None,
                 timeout: int | None = None, force: bool = False, overrides: dict | None = None,
                 scheduler: str | None = None, root: Path | None = None,
                 on_start=None, on_done=None, publish: bool = False) -> list[Outcome]:
    """Run chapters at a profile; return one :class:`Outcome` each, in the order given.

    ``publish=True`` writes each finished chapter's result to ``results/<profile>/`` (see
    :mod:`reprobook.book.publish`) as it finishes; it needs the profile's own parameters."""
    root = book_root(root)
    if publish:
        if profile == SMOKE:
            raise ValueError("--publish is for the faithful profiles (cpu, gpu): smoke results "
                             "are CI's and are not published")
        if overrides:
            raise ValueError("--publish needs the profile's own parameters: drop the -p overrides")
        on_done = _publishing(profile, root, on_done, {c.slug: c for c in chapters})
    todo, cached = plan(chapters, profile, overrides, timeout, force, root)
    for o in cached:
        if on_done:
            on_done(o)
    env = {GIT_COMMIT_ENV: git_commit(root)}
    outcomes: dict[str, Outcome] = {o.slug: o for o in cached}
    if todo:
        if scheduler:
            done = _run_dask(todo, profile, env, scheduler, root, on_start, on_done)
        else:
            done = _run_local(todo, profile, env, jobs, root, on_start, on_done)
        outcomes.update({o.slug: o for o in done})
    return [outcomes[c.slug] for c in chapters if c.slug in outcomes]


def _publishing(profile: str, root: Path, on_done, by_slug: dict):
    from .publish import publish

    def done(o: Outcome):
        if not o.failed and not o.mismatches:
            paths = result_paths(by_slug[o.slug], profile, root)
            publish(by_slug[o.slug], profile, json.loads(paths["ledger"].read_text()),
                    json.loads(paths["record"].read_text()), root)
        if on_done:
            on_done(o)
    return done


def _threads_env(jobs: int) -> dict:
    per = str(max(1, (os.cpu_count() or 1) // max(1, jobs)))
    return {"OMP_NUM_THREADS": per, "MKL_NUM_THREADS": per, "OPENBLAS_NUM_THREADS": per}


def _run_local(todo, profile, env, jobs, root, on_start, on_done) -> list[Outcome]:
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo)))
    env = {**env, **_threads_env(jobs)}
    lock = threading.Lock()
    results: list[Outcome] = []

    def one(job: _Job) -> Outcome:
        if on_start:
            on_start(job.chapter)
        if _CANCELLED.is_set():
            return None
        payload = execute_payload(job.launch(), job.parameters, job.timeout, env)
        if _CANCELLED.is_set():  # killed by an interrupt: not a result, leave no record
            return None
        with lock:
            out = _finish(job, profile, payload, "local", root)
            results.append(out)
            if on_done:
                on_done(out)
        return out

    _CANCELLED.clear()
    pool = cf.ThreadPoolExecutor(max_workers=jobs)
    futures = [pool.submit(one, j) for j in todo]
    try:
        for f in cf.as_completed(futures):
            f.result()
    except BaseException:
        _kill_active()  # finished chapters are already stored; running ones leave no record
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
    return results


def _run_dask(todo, profile, env, scheduler, root, on_start, on_done) -> list[Outcome]:
    try:
        from distributed import Client, as_completed
    except ImportError:  # pragma: no cover - distributed is a dependency
        raise RuntimeError("--scheduler needs the 'distributed' package") from None
    try:
        client = Client(scheduler, timeout="20s")
    except (OSError, TimeoutError) as e:
        raise RuntimeError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
    results = []
    try:
        futures = {}
        for job in todo:
            if on_start:
                on_start(job.chapter)
            fut = client.submit(execute_payload, job.launch(),
                                job.parameters, job.timeout, env, pure=False,
                                key=f"reprobook-{profile}-{job.chapter.slug}-{job.key[:8]}")
            futures[fut] = job
        for fut in as_completed(futures):
            job = futures[fut]
            try:
                payload = fut.result()
            except Exception as e:  # the worker died: report it like any failed chapter
                payload = {"result": {"status": "error", "error": f"Dask worker failed: {e!r}"},
                           "notebook": None, "ledger": None, "log": ""}
            out = _finish(job, profile, payload, f"dask {scheduler}", root)
            results.append(out)
            if on_done:
                on_done(out)
    finally:
        client.close()
    return results
