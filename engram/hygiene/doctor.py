"""``engram doctor``: find what is wrong with a store and repair what can be repaired safely.

Checks: memories.jsonl parses (bad lines, duplicate ids, git conflict markers, order and
canonical bytes), the sync chunks and manifest are sound (``engram.sync.audit``), no temp file
of a write cut short is left (``fix`` removes them), .gitignore keeps index/, state/ and temp
files out of git, no secrets sit anywhere engram keeps text (memories,
chunks, quarantine, state, index: ``engram.hygiene.secrets_audit``), which memories keep a
concurrent edit (``conflicts``), the git merge and diff drivers are set up, and the index
agrees with the file. ``fix`` rewrites the file canonically, merges duplicate ids with the one
merge function, repairs in place a line with a UTF-8 byte order mark or bytes that are not UTF-8
(``model.recover_line``), moves lines it cannot read to the committed
``quarantine/memories-*.jsonl`` (never deleting them, never into git-ignored ``state/``),
rewrites the manifest from ``chunks/`` and moves unreadable chunks to ``quarantine/chunks/``,
rewrites chunks of older engram versions in the form Go engram reads too,
redacts secrets, repairs .gitignore, installs the merge and diff drivers and rebuilds a drifted
index.
Feature layer: called by the service, prints nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engram import gitfiles
from engram.config import Config
from engram.errors import CorruptStore
from engram.fileio import read_own
from engram.hygiene.finding import Finding
from engram.index.db import Index
from engram.model import is_tombstone, now, recover_line
from engram.operations import advice
from engram.plural import counted
from engram.store import GITIGNORE, MemoryStore
from engram.store.files import (
    leftover_temps,
    missing_ignores,
    remove_leftover_temps,
    write_gitignore,
)
from engram.store.quarantine import keep_lines

if TYPE_CHECKING:
    from collections.abc import Callable

    from engram.store.jsonl import Scan
    from engram.sync.audit import ChunkAudit


def run_checks(
    config: Config,
    store: MemoryStore,
    index: Index,
    *,
    fix: bool,
    driver_command: str | None = None,
    agents: Callable[[], list[tuple[str, str]]] | None = None,
) -> list[Finding]:
    """Run every check on one store; repair what is safe when ``fix`` is set.

    ``driver_command``: check (and with ``fix`` install) the git merge driver with it.
    ``agents``: what is wrong with the agents' engram setups, as (severity, message): an agent
    that cannot start engram's hooks or server, Codex hooks it does not trust (never fixed
    here: the person trusts them, or reruns `engram setup`).
    """
    tidy = store.tidy
    findings = _check_temps(store, fix=fix)  # 0. before any lock hold would remove them
    if not fix:
        store.tidy = False  # report, change nothing: no lock hold removes or adds anything
    try:
        found = _run_checks(findings, config, store, index, fix=fix, driver_command=driver_command)
        if agents is not None:  # 7. the agents engram is set up in (the store's ok stands)
            found += [Finding(severity, "agents", message) for severity, message in agents()]
        return found
    finally:
        store.tidy = tidy


def _run_checks(
    findings: list[Finding],
    config: Config,
    store: MemoryStore,
    index: Index,
    *,
    fix: bool,
    driver_command: str | None,
) -> list[Finding]:
    findings += _check_file(store, fix=fix)  # 1. the canonical file
    findings += _check_chunks(store, fix=fix)  # 1b. sync chunks and the manifest
    findings += _check_gitignore(store, fix=fix)  # 2. git hygiene
    findings += _check_tracked_local(store, fix=fix)  # 2b. local state a commit carries
    # 3. Secrets anywhere engram keeps text (written by hand, by an older tool, by a teammate).
    from engram.hygiene.secrets_audit import check_secrets

    findings += check_secrets(store, index, fix=fix)
    findings += _check_config(config)  # 3b. after the scan above, which ran the patterns
    findings += _check_conflicts(store)  # 4. the merge function's losing text
    if driver_command is not None:  # 5. the git merge and diff drivers
        findings += _check_driver(config, driver_command, fix=fix)
    drift, live = _check_index(store, index, fix=fix)  # 6. index drift
    findings += drift
    note = index.vectors.model_note  # 7. the embedding model configured but not to be had
    if note and index.weights.mode != "keyword":
        findings.append(Finding("warning", "model", note))
    if not findings:
        findings.append(
            Finding(
                "ok",
                "all",
                f"{store.path}: {counted(live, 'memory')}, canonical, index in step, "
                "no secrets found",
            )
        )
    return findings


def _check_file(store: MemoryStore, *, fix: bool) -> list[Finding]:
    """Check memories.jsonl parses and is canonical; with ``fix``, rewrite it canonically."""
    findings: list[Finding] = []
    with store.lock():
        data, seen = store.read_bytes()
        scan = store.scan(data)
        for problem in scan.problems:
            findings.append(Finding("error", "memories.jsonl", problem.message))
        if not scan.problems and not scan.canonical:
            findings.append(
                Finding(
                    "warning", "memories.jsonl", f"{store.path} is not in canonical order or form"
                )
            )
        if fix and (scan.problems or not scan.canonical):
            findings += _repair_file(store, scan, seen)
            for finding in findings:
                if finding.check == "memories.jsonl":
                    finding.fixed = True
    return findings


def _repair_file(store: MemoryStore, scan: Scan, seen: str) -> list[Finding]:
    """Rewrite memories.jsonl from what it holds: repaired lines kept, unreadable ones set aside.

    Duplicate ids are merged with the one merge function; a line with a BOM or a bad byte is
    repaired in place; a line that cannot be read moves to the committed quarantine.
    """
    from engram.sync.merge import merge_sets

    findings: list[Finding] = []
    records = list(scan.records)
    unreadable = []
    for problem in scan.problems:
        if problem.kind == "conflict":
            continue  # the marker line itself; both sides' records are kept
        if problem.kind == "duplicate" and problem.record is not None:
            records.append(problem.record)  # merged below by the merge function
            continue
        raw = problem.raw
        try:  # a BOM or a bad byte: the record stays in the committed file
            record, how = recover_line(raw, path=str(store.path), lineno=problem.line)
        except CorruptStore:
            unreadable.append(raw)
            continue
        records.append(record)
        findings.append(
            Finding(
                "warning",
                "memories.jsonl",
                f"{store.path}:{problem.line}: memory {record['id']} repaired in place ({how})",
                fixed=True,
            )
        )
    merged = merge_sets(records)
    if unreadable:
        # Committed, not state/: the lines stay in the team's store, shown in git.
        stamp = now().replace(":", "").replace("-", "")
        target = keep_lines(store.dir, unreadable, stamp=stamp, scrub=store.scrubber.text)
        findings.append(
            Finding(
                "warning",
                "memories.jsonl",
                f"moved {len(unreadable)} unreadable line(s) to {target} (committed "
                "with the store: repair each line there and move it back into "
                "memories.jsonl, or delete the file)",
                fixed=True,
            )
        )
    # Built from the bytes read above: a file git replaced since raises StoreChanged.
    store.rewrite(list(merged.values()), expect=seen)
    return findings


def _check_temps(store: MemoryStore, *, fix: bool) -> list[Finding]:
    """Name the temp files killed writes left; with ``fix``, remove them."""
    found = leftover_temps(store.dir)
    if not found:
        return []
    removed = set(remove_leftover_temps(store.dir)) if fix else set()
    findings = []
    for path in found:
        findings.append(
            Finding(
                "warning",
                "temp files",
                f"{path}: temp file of a write that was cut short (not part of the store; "
                f"{advice.cmd('doctor', fix=True)} removes it)",
                fixed=path in removed,
            )
        )
    return findings


def _check_gitignore(store: MemoryStore, *, fix: bool) -> list[Finding]:
    """Check .gitignore keeps index/, state/ and temp files out of git; with ``fix``, add them."""
    ignore = store.dir / ".gitignore"
    odd = ""
    try:
        text = read_own(ignore)[0].decode("utf-8", "replace")
    except FileNotFoundError:
        text = ""
    except OSError as exc:  # NotAFile: a link to /dev/zero or a FIFO is never read
        text, odd = "", f" ({exc}; --fix writes a regular file in its place)"
    missing = missing_ignores(text)
    if not missing:
        return []
    finding = Finding(
        "warning",
        "gitignore",
        f"{ignore} does not ignore {', '.join(missing)}: local files would be committed{odd}",
    )
    if fix:
        fixed_text = text.rstrip("\n") + "\n" + "\n".join(missing) + "\n" if text else ""
        fixed_text = fixed_text or GITIGNORE
        write_gitignore(store.dir, fixed_text)
        finding.fixed = True
    return [finding]


def _check_tracked_local(store: MemoryStore, *, fix: bool) -> list[Finding]:
    """Check git tracks nothing under state/ and index/; with ``fix``, untrack them."""
    from engram.store.local import tracked_local, untrack_local

    problem = gitfiles.problem_at(store.dir)
    if problem is not None:  # git would wait on it forever: it is not run
        message = f"git cannot read the repository holding the store: {problem}"
        return [Finding("error", "git", f"{message}; {gitfiles.HINT}")]
    tracked = tracked_local(store.dir)
    if not tracked:
        return []
    shown = ", ".join(tracked[:5]) + (f" and {len(tracked) - 5} more" if len(tracked) > 5 else "")
    finding = Finding(
        "error",
        "git",
        f"git tracks local state: {shown}. engram takes no local state from a committed file "
        "(a lock there could name another socket): no daemon serves this store until they are "
        "untracked",
    )
    if fix:
        untrack_local(store.dir)
        finding.fixed = True
        finding.message += (
            "; removed them from git and from this clone (engram makes its own): commit the removal"
        )
    return [finding]


def _check_config(config: Config) -> list[Finding]:
    """Name committed settings engram does not use.

    A command (only the user's own settings may run one) and redaction patterns that do not
    compile or ran out of time.
    """
    from engram.store.patterns import problems

    findings = [Finding("warning", "config", message) for message in config.warnings()]
    patterns = [str(p) for p in config.get("redact.extra_patterns") or []]
    for left_out in problems(patterns):
        findings.append(Finding("warning", "config", f"redact.extra_patterns: {left_out}"))
    return findings


def _check_conflicts(store: MemoryStore) -> list[Finding]:
    """Name the memories that keep a concurrent edit (or a forget) that lost a merge."""
    findings: list[Finding] = []
    for record in store.scan().records:
        conflicts = record.get("conflicts")
        if not isinstance(conflicts, list) or not conflicts or is_tombstone(record):
            continue
        # A forget that lost to a later edit is noted with its deleted_at (sync.merge).
        forgets = [c for c in conflicts if isinstance(c, dict) and "deleted_at" in c]
        if forgets:
            findings.append(
                Finding(
                    "warning",
                    "conflicts",
                    f"memory {record['id']} was forgotten at {forgets[-1]['deleted_at']} "
                    "on another clone and a later edit brought it back: "
                    f"{advice.cmd('forget', id=record['id'][:8])} forgets it again; "
                    "update it to keep it",
                )
            )
        if len(conflicts) > len(forgets):
            findings.append(
                Finding(
                    "warning",
                    "conflicts",
                    f"memory {record['id']} keeps {len(conflicts) - len(forgets)} concurrent "
                    f"edit(s) that lost a merge: {advice.cmd('get', id=record['id'][:8])} shows "
                    "them; update the memory to settle it",
                )
            )
    return findings


def _check_driver(config: Config, driver_command: str, *, fix: bool) -> list[Finding]:
    """Check the git merge and diff drivers are set up (a fresh clone has .gitattributes only)."""
    from engram.sync.gitsetup import check_setup, install, runs

    setup = check_setup(config.root)
    if not setup.repo:
        return []
    findings = [
        *_driver_finding(
            "merge",
            {".gitattributes lines": setup.attributes, "driver": setup.driver},
            setup.command,
            broken="every git merge of .engram/ falls back to conflicts",
            unset="git merges of .engram/ fall back to line merges",
            runs=runs,
        ),
        *_driver_finding(
            "diff",
            {"diff=engram in .gitattributes": setup.diff_attribute, "textconv": setup.diff},
            setup.diff_command,
            broken="git diff of memories.jsonl fails",
            unset="git diff, log -p and show print memories.jsonl as raw JSON lines",
            runs=runs,
        ),
    ]
    if fix and findings:
        install(config.root, driver_command)
        for finding in findings:
            finding.fixed = True
    return findings


def _driver_finding(
    which: str,
    parts: dict[str, bool],
    command: str,
    *,
    broken: str,
    unset: str,
    runs: Callable[[str], bool],
) -> list[Finding]:
    """Return the finding about one git driver: missing parts, or a command that cannot run."""
    missing = [name for name, ok in parts.items() if not ok]
    if missing:
        message = (
            f"the engram {which} driver is not set up in this clone ({', '.join(missing)} "
            f"missing): {unset}"
        )
    elif not runs(command):
        message = (
            f"the configured {which} driver does not run here ({command!r}: its program is not "
            f"found): {broken}"
        )
    else:
        return []
    return [Finding("warning", "git", message)]


def _check_index(store: MemoryStore, index: Index, *, fix: bool) -> tuple[list[Finding], int]:
    """Check the index agrees with the file (with ``fix``, rebuild it); count live memories."""
    index.refresh()
    index.flush()
    live = {r["id"] for r in store.scan().records if not is_tombstone(r)}
    indexed = index.backend.ids()
    recorded = {r["id"] for r in index.all_records()}
    drift = (live ^ indexed) | (live ^ recorded)
    if not drift:
        return [], len(live)
    finding = Finding(
        "error",
        "index",
        f"the index disagrees with memories.jsonl on {counted(len(drift), 'memory')}",
    )
    if fix:
        index.rebuild()
        finding.fixed = True
    return [finding], len(live)


def _check_go_reach(store: MemoryStore, audit: ChunkAudit) -> list[Finding]:
    """Say which changes made here Go engram 1.7 in this repository cannot apply."""
    from engram.sync.audit import go_unreachable
    from engram.sync.manifest import read_manifest

    if not audit.go_old:
        return []
    try:
        edited, forgotten = go_unreachable(audit, store.read_all())
    except CorruptStore:
        return []  # the file's own findings say what is wrong
    if not edited and not forgotten:
        return []
    entries = {entry.id: entry for entry in read_manifest(store.dir)}
    last = max(
        (entries[i] for i in audit.go_old if i in entries),
        key=lambda entry: entry.created_at,
        default=None,
    )
    by = f", the last by {last.created_by} at {last.created_at}" if last is not None else ""
    chunks = counted(len(audit.go_old), "chunk")
    changes = " and ".join(
        part
        for part in (
            f"{counted(edited, 'memory')} edited" if edited else "",
            f"{counted(forgotten, 'memory')} forgotten" if forgotten else "",
        )
        if part
    )
    return [
        Finding(
            "warning",
            "go-engram",
            f"Go engram 1.7 or older syncs in this repository ({chunks} without sync_ids{by}): "
            "it adds every row it imports as a new one, so it cannot "
            f"apply an edit or a forget, and {changes} here since its store got them stay as "
            "they were there. Go engram versions with sync_ids apply them from the chunks' "
            "mutation journal: upgrade Go engram on the clones that use it",
        )
    ]


def _check_chunks(store: MemoryStore, *, fix: bool) -> list[Finding]:
    """Report each defect of ``chunks/`` and ``manifest.json``; with ``fix``, repair them."""
    from engram.sync.audit import audit_chunks, repair_chunks, rewrite_legacy
    from engram.sync.syncfiles import CHUNKS, MANIFEST, SUFFIX

    audit = audit_chunks(store.dir)
    found: list[Finding] = []
    if audit.manifest_error:  # then every chunk is unlisted: one finding says it all
        found.append(
            Finding(
                "error",
                "manifest",
                f"{audit.manifest_error} ({advice.cmd('doctor', fix=True)} rebuilds it from the "
                f"{counted(len(audit.unlisted), 'chunk')} in {CHUNKS}/)",
            )
        )
    found += [Finding("warning", "manifest", problem) for problem in audit.entry_problems]
    found += [
        Finding("warning", "manifest", f"{CHUNKS}/{ident}{SUFFIX} is not listed in {MANIFEST}")
        for ident in ([] if audit.manifest_error else audit.unlisted)
    ]
    found += [
        Finding("warning", "manifest", f"{MANIFEST} lists chunk {ident}, whose file is missing")
        for ident in audit.missing
    ]
    found += [Finding("error", "chunks", reason) for reason in audit.broken.values()]
    found += [
        Finding(
            "error",
            "chunks",
            f"{CHUNKS}/{ident}{SUFFIX}: content hashes to {actual}, not to its name",
        )
        for ident, actual in audit.misnamed.items()
    ]
    # Not repairable here and harmless to the rest: sync skips these records.
    found += [Finding("warning", "chunks", problem) for problem in audit.bad_records]
    found += [Finding("warning", "chunks", problem) for problem in audit.other]
    legacy = {
        ident: Finding(
            "warning",
            "chunks",
            f"{CHUNKS}/{ident}{SUFFIX} is in the JSON Lines form of older engram versions, "
            f"which Go engram's sync cannot read (and stops on): {advice.cmd('doctor', fix=True)}"
            " or `engram sync` rewrites it",
        )
        for ident in audit.legacy
    }
    found += legacy.values()
    found += _check_go_reach(store, audit)
    from engram.store.quarantine import quarantine_dir

    kept = sorted(quarantine_dir(store.dir).glob("memories-*.jsonl"))
    if kept:
        found.append(
            Finding(
                "warning",
                "quarantine",
                f"{counted(len(kept), 'file')} in {quarantine_dir(store.dir)} "
                f"{'holds' if len(kept) == 1 else 'hold'} lines set aside by "
                "an earlier `doctor --fix`: repair and move them back into memories.jsonl, or "
                "delete them",
            )
        )
    if fix and audit.manifest_stale:
        done = repair_chunks(store.dir, audit)
        for finding in found:
            if finding.check == "manifest" or finding.message in audit.broken.values():
                finding.fixed = True
            if finding.check == "chunks" and "hashes to" in finding.message:
                finding.fixed = True
        found += [Finding("warning", "chunks", sentence, fixed=True) for sentence in done]
    if fix and legacy:
        for rewritten in rewrite_legacy(store.dir, store.scrubber):
            if rewritten.old in legacy:
                legacy[rewritten.old].fixed = True
                legacy[rewritten.old].message = rewritten.sentence()
    return found
