"""The provider's documentation (docs/airflow) against the code it describes.

- every operator and sensor the provider info names has a page whose parameter table
  lists each ``__init__`` parameter, with its default and whether it is templated;
- the connection page lists every extra the connection form declares, with its type,
  and its URI and JSON examples read as the same connection, by Airflow and by
  ``RcpHook``;
- the example code on a page is the marked region (``# [START name]`` ...
  ``# [END name]``) of the example DAG it names, and every marked region is shown;
- every other Python example runs, against a real ``rcpd serve`` and the connection
  ``rcp_storage`` to it, and the trees it makes are copies of the example tree;
- every relative link of the pages, and the README's links into docs/, lead to a file
  (and heading) that exists.

Markdown is read as GitHub renders it: fenced blocks at the start of a line, an
example's source in the HTML comment on the line before its block
(``<!-- example: dags_examples/FILE.py REGION -->``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import re
import shlex
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG, BaseOperator, BaseSensorOperator

from rcp_core.schema import Front, offered
from rcp_provider.fsspec.service import RcpServiceFileSystem
from rcp_provider.get_provider_info import get_provider_info
from rcp_provider.hooks.endpoint import Endpoint, typed_extras
from rcp_provider.hooks.rcp import RcpHook
from support.services import TOKEN, Served
from support.treecmp import TreeCompare
from support.treespec import File, Spec, make_tree

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "airflow"
DAGS = ROOT / "dags_examples"
PAGES = sorted(DOCS.rglob("*.md"))
PARAMETERS = "| Parameter | Default | Templated | Meaning |"
EXTRAS = "| Extra | Type | Default | Meaning |"
FIELDS = "| Field | Default | Meaning |"
FINGERPRINT = "41b82c1181d2ea443878f43d90f39139e64cdcbeaa97d9dab408650dbb780e4b"
"""The fingerprint the pages show; an example holding it talks to the service by
URL (see :func:`_substituted`)."""
SERVICE = "storage-01.example.org:7450"
EXAMPLE_TREE: Spec = {
    "README": File(b"The projects tree of the examples.\n", 0o644),
    "alpha/plan.txt": File(b"x" * 5000, 0o640),
    "alpha/notes/today.md": File(b"# today\n", 0o600),
    **{f"beta/part{i}.bin": File(bytes([i]) * (100 * i)) for i in range(1, 9)},
}


@dataclass(frozen=True, slots=True)
class Block:
    """A fenced code block; ``source`` the DAG file and region it is an example of."""

    language: str
    code: str
    source: tuple[str, str] | None


@dataclass(frozen=True, slots=True)
class Page:
    path: Path
    prose: list[str]
    """The lines outside code blocks (headings, tables, links)."""
    blocks: list[Block]

    @property
    def name(self) -> str:
        return self.path.relative_to(ROOT).as_posix()


EXAMPLE_MARK = re.compile(r"<!-- example: (\S+) (\S+) -->")
FENCE = re.compile(r"```(\w*)")
HEADING = re.compile(r"(#+) (.+)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def read_page(path: Path) -> Page:
    prose: list[str] = []
    blocks: list[Block] = []
    lines = path.read_text().splitlines()
    at = 0
    while at < len(lines):
        line = lines[at]
        mark = EXAMPLE_MARK.fullmatch(line)
        opening = FENCE.fullmatch(lines[at + 1] if mark else line)
        if mark and not opening:
            raise AssertionError(f"{path}:{at + 1}: no code block after {line}")
        if opening is None:
            prose.append(line)
            at += 1
            continue
        start = at + (2 if mark else 1)
        end = lines.index("```", start)
        source = (mark.group(1), mark.group(2)) if mark else None
        code = "\n".join(lines[start:end]) + "\n"
        blocks.append(Block(opening.group(1), code, source))
        at = end + 1
    return Page(path, prose, blocks)


def page(relative: str) -> Page:
    return read_page(DOCS / relative)


def section(page: Page, name: str) -> list[str]:
    """The lines under the heading naming ``name`` (in backticks), to the next
    heading of its level or above."""
    found: list[str] | None = None
    level = 0
    for line in page.prose:
        heading = HEADING.fullmatch(line)
        if found is not None and heading and len(heading.group(1)) <= level:
            break
        if found is not None:
            found.append(line)
        elif heading and f"`{name}`" in heading.group(2):
            found, level = [], len(heading.group(1))
    assert found is not None, f"{page.name}: no heading names `{name}`"
    return found


def table(lines: list[str], header: str) -> list[list[str]]:
    """The rows (cells) of the table under ``header`` among ``lines``."""
    assert header in lines, f"no table {header!r}"
    rows: list[list[str]] = []
    for line in lines[lines.index(header) + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def code_name(cell: str) -> str:
    """The name a table row is about: its first cell's code span."""
    match = re.fullmatch(r"`(\w+)`", cell)
    assert match, f"not a name in backticks: {cell!r}"
    return match.group(1)


def first_literal(cell: str) -> Any:
    """The Python literal in a table cell's first code span."""
    literal = re.match(r"`([^`]+)`", cell)
    assert literal, f"no literal in {cell!r}"
    return ast.literal_eval(literal.group(1))


# -- operators and sensors --------------------------------------------------------------


def _operator_classes() -> list[type[BaseOperator]]:
    """The operator and sensor classes of the modules the provider info names."""
    info = get_provider_info()
    found: list[type[BaseOperator]] = []
    for key in ("operators", "sensors"):
        for group in info[key]:
            for module_name in group["python-modules"]:
                module = importlib.import_module(module_name)
                found += [
                    cls
                    for _, cls in inspect.getmembers(module, inspect.isclass)
                    if issubclass(cls, BaseOperator) and cls.__module__ == module_name
                ]
    return found


CLASSES = _operator_classes()
OPERATOR_PAGES = [read_page(path) for path in sorted((DOCS / "operators").glob("*.md"))]


def _class_page(cls: type[BaseOperator]) -> Page:
    """The one operator page with a heading naming ``cls``."""
    named = [
        page
        for page in OPERATOR_PAGES
        if any(
            HEADING.fullmatch(line) and f"`{cls.__name__}`" in line
            for line in page.prose
        )
    ]
    assert len(named) == 1, f"{cls.__name__}: pages {[p.name for p in named]}"
    return named[0]


def _stored_as(cls: type[BaseOperator]) -> dict[str, set[str]]:
    """Each ``__init__`` parameter's attributes: ``self.X = parameter``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__)))
    stored: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Name)
            and len(node.targets) == 1
            and isinstance(target := node.targets[0], ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            stored.setdefault(node.value.id, set()).add(target.attr)
    return stored


def _parameters(cls: type[BaseOperator]) -> dict[str, inspect.Parameter]:
    """``cls.__init__``'s own parameters (not ``self``, not ``**kwargs``: Airflow's)."""
    return {
        name: parameter
        for name, parameter in inspect.signature(cls.__init__).parameters.items()
        if name != "self" and parameter.kind is not inspect.Parameter.VAR_KEYWORD
    }


def test_the_provider_names_operators_and_sensors() -> None:
    names = {cls.__name__ for cls in CLASSES}
    assert {"RcpCopyOperator", "RcpPathSensor"} <= names, names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_each_parameter_is_documented_with_its_default_and_templating(
    cls: type[BaseOperator],
) -> None:
    parameters = _parameters(cls)
    stored = _stored_as(cls)
    rows = table(section(_class_page(cls), cls.__name__), PARAMETERS)
    documented = {code_name(row[0]): row for row in rows}
    assert set(documented) == set(parameters), cls.__name__
    for name, parameter in parameters.items():
        _, default, templated, meaning = documented[name]
        if parameter.default is inspect.Parameter.empty:
            assert default == "required", name
        else:
            assert first_literal(default) == parameter.default, name
        is_templated = bool(stored.get(name, set()) & set(cls.template_fields))
        assert templated == ("yes" if is_templated else "no"), name
        assert meaning, name
    reached = set().union(*stored.values())
    assert set(cls.template_fields) <= reached, "a template field no parameter sets"


# -- the connection ------------------------------------------------------------------


CONNECTION = get_provider_info()["connection-types"][0]


def test_every_connection_field_and_extra_is_documented() -> None:
    lines = page("connections.md").prose
    behaviour = CONNECTION["ui-field-behaviour"]
    named = " ".join(row[0] for row in table(lines, FIELDS)).lower()
    for field in [*behaviour["relabeling"], *behaviour["hidden-fields"]]:
        assert field in named, field
    rows = {code_name(row[0]): row for row in table(lines, EXTRAS)}
    fields = CONNECTION["conn-fields"]
    assert set(rows) == set(fields)
    for key, field in fields.items():
        schema = field["schema"]
        (kind,) = (t for t in schema["type"] if t != "null")
        minimum = schema.get("minimum")
        expected = kind if minimum is None else f"{kind} >= {minimum}"
        assert rows[key][1] == expected, key


def _connection_examples() -> dict[str, dict[str, str]]:
    """The ``export AIRFLOW_CONN_X='...'`` lines of the connection page: for each
    variable, its ``uri`` and its ``json``."""
    examples: dict[str, dict[str, str]] = {}
    for block in page("connections.md").blocks:
        for line in block.code.splitlines():
            if match := re.fullmatch(r"export (AIRFLOW_CONN_\w+)=(.+)", line):
                (value,) = shlex.split(match.group(2))
                form = "json" if value.startswith("{") else "uri"
                examples.setdefault(match.group(1), {})[form] = value
    return examples


CONNECTION_EXAMPLES = _connection_examples()


def test_the_examples_show_every_extra_in_both_forms() -> None:
    assert CONNECTION_EXAMPLES
    shown: set[str] = set()
    for variable, forms in CONNECTION_EXAMPLES.items():
        assert set(forms) == {"uri", "json"}, variable
        shown |= set(json.loads(forms["json"]).get("extra", {}))
    assert shown == set(CONNECTION["conn-fields"])


@pytest.mark.parametrize("variable", sorted(CONNECTION_EXAMPLES))
def test_a_uri_example_is_the_connection_its_json_example_is(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow reads both forms into the same fields (the URI's extras as text), the
    hook's extras reader into the same values, and ``RcpHook`` into the same place."""
    from airflow.models.connection import Connection

    conn_id = variable.removeprefix("AIRFLOW_CONN_").lower()
    forms = CONNECTION_EXAMPLES[variable]
    by_uri = Connection(conn_id=conn_id, uri=forms["uri"])
    by_json = Connection.from_json(forms["json"], conn_id=conn_id)
    for conn in (by_uri, by_json):
        assert conn.conn_type == "rcp"
    fields = [
        (conn.host or None, conn.port, conn.password) for conn in (by_uri, by_json)
    ]
    assert fields[0] == fields[1]
    extras = [typed_extras(conn_id, c.extra_dejson) for c in (by_uri, by_json)]
    assert extras[0] == extras[1]
    assert set(by_json.extra_dejson) <= set(CONNECTION["conn-fields"])
    places: list[tuple[Endpoint | None, int | None]] = []
    for form in ("uri", "json"):
        monkeypatch.setenv(variable, forms[form])
        hook = RcpHook(conn_id)
        places.append((hook.endpoint, hook.max_workers))
    assert places[0] == places[1]
    endpoint = places[0][0]
    assert (endpoint is None) == (by_json.host is None)
    if endpoint is not None:
        assert (endpoint.host, endpoint.token) == (by_json.host, by_json.password)


# -- the filesystem -----------------------------------------------------------------


def test_the_filesystems_storage_options_are_the_engines_with_their_defaults() -> None:
    rows = table(page("filesystem.md").prose, "| Storage option | Default | Meaning |")
    documented = {code_name(row[0]): row[1] for row in rows}
    options = {option.name: option for option in offered(Front.FSSPEC)}
    assert set(documented) == set(options)
    for name, option in options.items():
        value = option.read(first_literal(documented[name]), Front.FSSPEC)
        assert value == option.default(Front.FSSPEC), name


def test_the_service_forms_options_are_its_parameters_with_their_defaults() -> None:
    rows = table(page("filesystem.md").prose, "| Service option | Default | Meaning |")
    documented = {code_name(row[0]): row[1] for row in rows}
    parameters = inspect.signature(RcpServiceFileSystem.__init__).parameters
    unused = {"self", "username", "storage_options"}  # a user name is not used
    assert set(documented) == set(parameters) - unused
    for name, default in documented.items():
        if parameters[name].default is inspect.Parameter.empty:
            assert default.startswith("required"), name
        else:
            assert first_literal(default) == parameters[name].default, name


# -- examples from the DAGs -------------------------------------------------------------


def _regions(path: Path) -> dict[str, str]:
    """The marked regions of a DAG file, dedented (Airflow's ``exampleinclude``)."""
    lines = path.read_text().splitlines(keepends=True)
    regions: dict[str, str] = {}
    for at, line in enumerate(lines):
        if start := re.fullmatch(r"\s*# \[START (\w+)\]\n", line):
            name = start.group(1)
            end = next(
                i for i in range(at, len(lines)) if f"# [END {name}]" in lines[i]
            )
            assert name not in regions, f"{path.name}: {name} twice"
            regions[name] = textwrap.dedent("".join(lines[at + 1 : end]))
    ends = {m for line in lines for m in re.findall(r"# \[END (\w+)\]", line)}
    assert ends == set(regions), f"{path.name}: unpaired markers"
    return regions


INCLUDES = [
    (read.name, block)
    for read in map(read_page, PAGES)
    for block in read.blocks
    if block.source is not None
]


@pytest.mark.parametrize(
    ("name", "block"),
    INCLUDES,
    ids=[f"{name}:{block.source[1]}" for name, block in INCLUDES if block.source],
)
def test_an_example_is_the_marked_region_of_its_dag(name: str, block: Block) -> None:
    assert block.source is not None
    path, region = block.source
    assert block.language == "python", name
    assert block.code == _regions(ROOT / path)[region], f"{name}: {region}"


def test_every_marked_region_of_the_example_dags_is_shown() -> None:
    marked = {
        (path.relative_to(ROOT).as_posix(), region)
        for path in sorted(DAGS.glob("*.py"))
        for region in _regions(path)
    }
    shown = {block.source for _, block in INCLUDES}
    assert marked, "no marked regions"
    assert marked == shown


# -- examples that run ----------------------------------------------------------------


RUNNABLE = [
    (read.name, index, block.code)
    for read in map(read_page, PAGES)
    for index, block in enumerate(read.blocks)
    if block.language == "python" and block.source is None
]


@dataclass(frozen=True, slots=True)
class Places:
    """Where the examples' paths are: ``/tmp/rcp-demo`` (the worker's) and the
    service's roots ``/srv/data`` and ``/srv/backup``."""

    demo: Path
    data: Path
    backup: Path


@pytest.fixture
def places(
    tmp_path: Path,
    rcp_service: Served,
    rcp_connection: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Places:
    """The example tree as ``/tmp/rcp-demo/src`` and ``/srv/data/projects``, and the
    connection ``rcp_storage`` to the service."""
    assert rcp_connection == "rcp_storage"
    monkeypatch.chdir(tmp_path)
    demo = tmp_path / "demo"
    make_tree(demo / "src", EXAMPLE_TREE)
    make_tree(rcp_service.data / "projects", EXAMPLE_TREE)
    return Places(demo, rcp_service.data, rcp_service.backup)


def _substituted(code: str, places: Places, service: Served) -> str:
    """``code`` with the examples' places made the test's; where it holds the pages'
    fingerprint (it reaches the service by URL), the service's address, fingerprint
    and token too."""
    swaps = {
        "/tmp/rcp-demo": str(places.demo),
        "/srv/data": str(places.data),
        "/srv/backup": str(places.backup),
    }
    if FINGERPRINT in code:
        host, port = service.service.address
        swaps |= {
            SERVICE: f"{host}:{port}",
            FINGERPRINT: service.identity.fingerprint,
            "s3cret-token": TOKEN,
        }
    for old, new in swaps.items():
        code = code.replace(old, new)
    return code


def _operators(namespace: dict[str, Any]) -> list[BaseOperator]:
    """The operators an example made, alone or in its DAGs, each once, sensors aside
    (their test pokes them)."""
    found: dict[int, BaseOperator] = {}
    for value in namespace.values():
        for task in value.tasks if isinstance(value, DAG) else [value]:
            if isinstance(task, BaseOperator) and not isinstance(
                task, BaseSensorOperator
            ):
                found.setdefault(id(task), task)
    return list(found.values())


def _directories(*parents: Path) -> set[Path]:
    return {path for parent in parents for path in parent.iterdir() if path.is_dir()}


def _run(code: str, name: str, places: Places, service: Served) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"docs:{name}"}
    exec(compile(_substituted(code, places, service), name, "exec"), namespace)
    for operator in _operators(namespace):
        operator.execute(context={})
    return namespace


@pytest.mark.parametrize(
    ("name", "index", "code"),
    RUNNABLE,
    ids=[f"{name}:{index}" for name, index, _ in RUNNABLE],
)
def test_an_example_runs_and_its_copies_are_the_example_tree(
    name: str,
    index: int,
    code: str,
    places: Places,
    rcp_service: Served,
    tree_compare: TreeCompare,
) -> None:
    """Each example runs as written (its operators executed as a task executes
    them); every tree it makes is the example tree, by content."""
    reference = places.demo / "src"
    before = _directories(places.demo, places.backup)
    _run(code, f"{name}[{index}]", places, rcp_service)
    for made in sorted(_directories(places.demo, places.backup) - before):
        assert tree_compare(reference, made, mode=False, times=False) == [], made


def test_the_sensors_example_waits_for_a_path_and_for_a_job(
    places: Places, rcp_service: Served
) -> None:
    ((name, index, code),) = [r for r in RUNNABLE if r[0].endswith("/sensors.md")]
    dag = _run(code, f"{name}[{index}]", places, rcp_service)["dag"]
    landed, job_done = dag.get_task("landed"), dag.get_task("job_done")
    assert landed.poke(context={}) is False
    marker = places.data / "incoming" / "_SUCCESS"
    marker.parent.mkdir()
    marker.touch()
    assert landed.poke(context={}) is True
    with rcp_service.client() as client:
        job = client.submit(
            [str(places.data / "projects")], str(places.backup / "projects")
        )
        while client.status(job["job"])["state"] in ("queued", "running"):
            client.wait(job["job"], 1.0)
    job_done.render_template_fields({"params": {"job_id": job["job"]}})
    answer = job_done.poke(context={})
    assert answer.is_done
    assert answer.xcom_value["state"] == "succeeded"


# -- links ----------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {
        _slug(match.group(2))
        for line in read_page(path).prose
        if (match := HEADING.fullmatch(line))
    }


def _links() -> list[tuple[Path, str]]:
    """Every relative link of the pages, and the README's into docs/ (each once)."""
    found: dict[tuple[Path, str], None] = {}
    for path in [*PAGES, ROOT / "README.md"]:
        for line in read_page(path).prose:
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"[a-z]+:", target):
                    continue  # https:, mailto:
                if path.name == "README.md" and not target.startswith("docs/"):
                    continue
                found[path, target] = None
    return list(found)


LINKS = _links()


@pytest.mark.parametrize(
    ("path", "target"),
    LINKS,
    ids=[f"{p.relative_to(ROOT).as_posix()}->{t}" for p, t in LINKS],
)
def test_a_link_leads_to_a_file_and_heading_that_exist(path: Path, target: str) -> None:
    file, _, anchor = target.partition("#")
    linked = (path.parent / file).resolve() if file else path
    assert linked.exists(), f"{path.name}: {target}"
    if anchor:
        assert linked.suffix == ".md", target
        assert anchor in _anchors(linked), f"{path.name}: {target}"


def test_every_page_is_linked_from_the_index() -> None:
    index = DOCS / "index.md"
    linked = {
        (DOCS / target.partition("#")[0]).resolve()
        for source, target in LINKS
        if source == index and target.partition("#")[0]
    }
    assert set(PAGES) - {index} <= linked
    assert os.path.relpath(index, ROOT) in {
        t for s, t in LINKS if s.name == "README.md"
    }
