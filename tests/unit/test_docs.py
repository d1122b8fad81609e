"""The README and docs/ stay true to the tree: every path they name exists, every link lands, and every
example that addresses `make demo`'s cluster says whether
tests/integration/admin_and_cli/test_doc_examples.py runs it."""

from __future__ import annotations

import re

from tests.doc_examples import REPO_ROOT, blocks, documents

# A path as prose and commands name one: `broker/log/log.py`, broker/log/cleaner/, tests/integration/test_*.py.
_PATH = re.compile(r"(?<![\w./<-])([A-Za-z_][\w.-]*/[\w./*-]*[\w/*])")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_MODULE = re.compile(r"(?<![\w./-])((?:broker|controller|client|common|zk|proto|minibroker|local_cluster|chaos"
                     r"|spark_jobs|bench)(?:\.[a-z][a-z0-9_]*)+)\b")
_RUNNABLE = {"sh", "python"}
# Dotted names that are Kafka config keys (`client.id`) or file names (`chaos.html`), not modules.
_NOT_MODULES = {"id", "html", "png", "properties", "proto", "json", "jsonl", "log", "cfg", "parquet", "yml", "py", "md",
                "txt"}


def _top_level() -> set[str]:
    return {p.name for p in REPO_ROOT.iterdir() if not p.name.startswith(".")}


def _exists(name: str, top_level: set[str]) -> bool:
    first = name.split("/", 1)[0]
    if first in top_level:
        return any(REPO_ROOT.glob(name.rstrip("/"))) if "*" in name else (REPO_ROOT / name).exists()
    # A module named inside its package, as `log/segment.py` in the broker's text: it exists in some package.
    return any((REPO_ROOT / package / name).exists() for package in top_level)


def named_paths(text: str) -> set[str]:
    """The repository paths a document names: those under a top-level entry, and relative module files."""
    top_level = _top_level()
    return {m for m in _PATH.findall(text)
            if m.split("/", 1)[0] in top_level or m.endswith(".py")}


def test_every_path_the_docs_name_exists() -> None:
    top_level = _top_level()
    missing = [f"{doc.relative_to(REPO_ROOT)}: {name}" for doc in documents()
               for name in sorted(named_paths(doc.read_text())) if not _exists(name, top_level)]
    assert missing == []


def test_every_module_the_docs_name_exists() -> None:
    """`local_cluster`, `zk.server.free_port`: the package and module before any attribute exist."""
    missing = []
    for doc in documents():
        for name in sorted(set(_MODULE.findall(doc.read_text()))):
            if name.rsplit(".", 1)[1] in _NOT_MODULES:
                continue
            package, module = name.split(".")[:2]
            if not ((REPO_ROOT / package / module).is_dir() or (REPO_ROOT / package / f"{module}.py").exists()):
                missing.append(f"{doc.relative_to(REPO_ROOT)}: {name}")
    assert missing == []


def test_every_link_between_the_docs_lands() -> None:
    broken = [f"{doc.relative_to(REPO_ROOT)}: {target}" for doc in documents()
              for target in _LINK.findall(doc.read_text())
              if "://" not in target and not (doc.parent / target).exists()]
    assert broken == []


def test_every_example_for_the_demo_cluster_is_run_or_says_why_not() -> None:
    unmarked = [b.where for doc in documents() for b in blocks(doc)
                if b.language in _RUNNABLE and b.addresses_demo_cluster and b.marker is None]
    assert unmarked == []


def test_the_path_check_catches_a_path_that_is_gone() -> None:
    top_level = _top_level()
    names = named_paths("see `broker/log/no_such_module.py`, log/segment.py and tests/integration/groups/test_*.py")
    assert names == {"broker/log/no_such_module.py", "log/segment.py", "tests/integration/groups/test_*.py"}
    assert [n for n in sorted(names) if not _exists(n, top_level)] == ["broker/log/no_such_module.py"]


def test_the_readme_opens_with_exactly_the_two_commands() -> None:
    first = blocks(REPO_ROOT / "README.md")[0]
    assert first.line == 3
    assert [line.split("#")[0].strip() for line in first.code.splitlines()] == ["make demo", "make test"]


def test_the_readmes_spark_examples_are_the_ones_docs_spark_md_runs() -> None:
    """The README's Spark section shows docs/spark.md's streaming read and pipeline without running them a
    second time against the demo cluster (two more Spark start-ups): they must stay the blocks that run."""
    run = {b.code for b in blocks(REPO_ROOT / "docs" / "spark.md") if b.marker == "demo"}
    readme = REPO_ROOT / "README.md"
    lines = readme.read_text().splitlines()
    copies = [b for b in blocks(readme)
              if lines[b.line - 2].endswith("docs/spark.md runs this same block against the demo cluster -->")]
    assert len(copies) == 2
    assert [b.where for b in copies if b.code not in run] == []
