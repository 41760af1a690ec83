"""Every path and module the project's documents name exists (issue 21): the READMEs, the
config and schema comments, the workflow's rules and report captions, and the package's own
docstrings. A reference to a moved file is a broken promise to a reader."""

import importlib
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _project_files() -> list[Path]:
    """The project's files: what git tracks or would track (ignored files such as pytest's
    cache, a venv or results are no documentation), or every file when git is unavailable."""
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
        return [ROOT / line for line in out.splitlines()]
    except (OSError, subprocess.CalledProcessError):
        return list(ROOT.rglob("*"))


DOCS = sorted(p for p in _project_files()
              if p.is_file() and p.suffix in (".md", ".yaml", ".yml", ".smk", ".rst", ".py")
              and not {".venv", ".git", "results", ".snakemake", "data"} & set(p.parts)
              and "expansions" not in p.parts)
PATH = re.compile(r"(?<![\w/.-])((?:src|workflow|config|tests|benchmarks|\.test)/[\w./-]*\w)")
# a module or attribute named in backticks (Markdown code, reST roles such as :mod:)
MODULE = re.compile(r"`~?(bnstudy(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?:\(\))?`")


def _paths(text: str):
    for m in PATH.finditer(text):
        p = m.group(1)
        if not any(c in p for c in "*<{"):
            yield p


def _resolves(dotted: str) -> bool:
    """``dotted`` is a module, or an attribute of one (a function, a class, a constant)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_named_path_and_module_exists(doc):
    text = doc.read_text(encoding="utf-8", errors="ignore")
    missing = sorted({p for p in _paths(text) if not (ROOT / p).exists()})
    assert not missing, f"{doc.relative_to(ROOT)} names paths that do not exist: {missing}"
    bad = sorted({m for m in MODULE.findall(text) if not _resolves(m)})
    assert not bad, f"{doc.relative_to(ROOT)} names modules/attributes that do not exist: {bad}"


IMPORT = re.compile(r"\bfrom (bnstudy(?:\.\w+)*) import (\w+(?:, *\w+)*)")
VERB = re.compile(r"python -m bnstudy ([a-z][\w-]*)")


@pytest.mark.parametrize("doc", [d for d in DOCS if d.suffix in (".md", ".rst", ".yaml")],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_import_in_a_documents_commands_works(doc):
    """``python -c "from bnstudy.x import y"`` in a recipe is run by readers as written."""
    text = doc.read_text(encoding="utf-8", errors="ignore")
    bad = sorted({f"from {m} import {n}" for m, names in IMPORT.findall(text)
                  for n in re.split(r", *", names) if not _resolves(f"{m}.{n}")})
    assert not bad, f"{doc.relative_to(ROOT)} shows imports that fail: {bad}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_named_cli_verb_exists(doc):
    from bnstudy.cli import main as cli

    text = doc.read_text(encoding="utf-8", errors="ignore")
    bad = sorted(set(VERB.findall(text)) - set(cli.COMMANDS))
    assert not bad, f"{doc.relative_to(ROOT)} names verbs `python -m bnstudy` lacks: {bad}"


LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_a_door():
    """The README (issue 33) stays short: what bnstudy is, the quick start, what it found (one
    table, the ledgers in studies/README.md), layout, extending, GPU and cluster; the details
    live in the pages it links, and every relative link (and its #anchor) resolves."""
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 350, f"README.md has {len(text.splitlines())} lines (<= 350)"
    for target in LINK.findall(text):
        if "://" in target:
            continue
        path, _, anchor = target.partition("#")
        file = ROOT / path if path else readme
        assert file.exists(), f"README.md links to {target}, which does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), re.M)
            slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                     for h in headings}
            assert anchor in slugs, f"README.md links to {target}: no such heading"
    for page in ("EXTENDING.md", "studies/README.md", "docs/running.md"):
        assert f"]({page})" in text, f"README.md does not link {page}"
