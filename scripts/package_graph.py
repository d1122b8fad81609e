"""Print the broker's package graph: which broker/ package imports which, the imports that run up the
layers contract's order (pyproject.toml, contract id "broker-layers"), and the package pairs importing each other.

Run from the repo root: `.venv/bin/python scripts/package_graph.py` (grimp comes with import-linter); an argument
such as "api > coordinator > server > replication | fetcher | purgatory > log" checks another order (top first).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]


def _layers(order: str | None) -> list[list[str]]:
    if order:  # e.g. "api > coordinator > server > replication | fetcher | purgatory > log"
        return [[f"broker.{name.strip()}" for name in layer.split("|")] for layer in order.split(">")]
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    for contract in config["contracts"]:
        if contract["id"] == "broker-layers":
            container = contract["containers"][0]
            return [[f"{container}.{name.strip()}" for name in layer.split("|")] for layer in contract["layers"]]
    raise SystemExit("no broker-layers contract in pyproject.toml")


def _package(module: str) -> str | None:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "broker" and len(parts) > 1 else None


def main() -> int:
    sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph("broker")
    edges: dict[tuple[str, str], list[str]] = {}
    for importer in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(importer):
            a, b = _package(importer), _package(imported)
            if a and b and a != b:
                edges.setdefault((a, b), []).append(f"{importer} -> {imported}")
    layers = _layers(sys.argv[1] if len(sys.argv) > 1 else None)
    rank = {package: i for i, layer in enumerate(layers) for package in layer}
    print("package graph (importer -> imported: module imports)")
    for (a, b), lines in sorted(edges.items()):
        print(f"  {a} -> {b}: {len(lines)}")
    unranked = sorted({p for edge in edges for p in edge if p not in rank})
    if unranked:
        print(f"not in the order (left out of the count): {', '.join(unranked)}")
    up_edges = [(a, b) for (a, b) in sorted(edges) if a in rank and b in rank and rank[a] > rank[b]]
    upward = [line for edge in up_edges for line in edges[edge]]
    print(f"imports running up the order: {len(upward)} module imports over {len(up_edges)} package edges")
    for line in upward:
        print(f"  {line}")
    mutual = sorted((a, b) for (a, b) in edges if a < b and (b, a) in edges)
    print(f"package pairs importing each other: {len(mutual)}")
    for a, b in mutual:
        print(f"  {a} <-> {b}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
