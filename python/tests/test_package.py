"""The package as installed: stubs, markers, compiled policies."""

import ast
import inspect
import os
import subprocess

import pytest

import agenra
from agenra import _agenra

HERE = os.path.dirname(agenra.__file__)


def _stub_names():
    """{class or function name: set of member names (None for a function)}."""
    with open(os.path.join(HERE, "_agenra.pyi"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = set()
            for n in node.body:
                if isinstance(n, ast.FunctionDef):
                    members.add(n.name)
                elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
                    members.add(n.target.id)
            names[node.name] = members
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = None
    return names


def test_the_stubs_cover_the_compiled_module():
    stubs = _stub_names()
    public = [n for n in dir(_agenra) if not n.startswith("_")]
    assert sorted(n for n in public if n not in stubs) == []
    for name in public:
        obj = getattr(_agenra, name)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            members = {m for m in vars(obj) if not m.startswith("_")}
            stubbed = {m for m in stubs[name] if not m.startswith("_")}
            assert members == stubbed, name


def test_the_package_ships_its_type_markers():
    assert os.path.exists(os.path.join(HERE, "py.typed"))
    assert os.path.exists(os.path.join(HERE, "_agenra.pyi"))


def test_decisions_are_immutable():
    s = agenra.compile_policy("tool t();\ngrant g: t quota 1;\n").session()
    d = s.authorize("t")
    with pytest.raises(AttributeError):
        d.verdict = "DENY"
    with pytest.raises(AttributeError):
        d.extra = 1


def test_a_compiled_policy_from_agenra_compile(agenra_bin, tmp_path):
    src = tmp_path / "p.agr"
    src.write_text('policy "p";\ntool t(a: string);\ngrant g: t where a == "x" quota 1;\n')
    out = tmp_path / "p.json"
    subprocess.run([agenra_bin, "compile", str(src), "-o", str(out)], check=True, capture_output=True)
    compiled = agenra.load_policy(out)
    assert compiled.hash == agenra.load_policy(src).hash
    assert compiled.session().authorize("t", {"a": "x"}).verdict == "ALLOW"
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": 3}')
    with pytest.raises(agenra.PolicyError, match=r"bad.json:1:\d+: not a compiled policy"):
        agenra.load_policy(bad)
