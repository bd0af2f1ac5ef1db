"""The package layout is the architecture: imports point inward (api -> partitions -> raftlog), never back."""

from __future__ import annotations

import ast
import functools
import pathlib
import re
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALLOWED = {
    "raftlog": {"raftlog"},
    "membership": {"membership", "raftlog"},
    "partitions": {"partitions", "raftlog", "membership"},
    "raftlog_contract": {"raftlog_contract"},  # the HTTP API's wire contract: a leaf both sides import
    "raftlog_client": {"raftlog_client", "raftlog_contract", "raftlog"},
    # the two front doors: neither imports the other; the process root composes them
    "api": {"api", "partitions", "membership", "raftlog", "raftlog_contract"},
    "kafka_api": {"kafka_api", "partitions", "raftlog"},
    "raftlog_node": {
        "raftlog_node",
        "api",
        "kafka_api",
        "partitions",
        "membership",
        "raftlog",
    },
    # starts nodes as processes
    "raftlog_dev": {"raftlog_dev", "raftlog_node", "raftlog_client", "raftlog_contract", "raftlog"},
    "jepsen": {"jepsen", "raftlog_dev", "raftlog_client", "raftlog_contract"},
    "raftlog_bench": {"raftlog_bench", "raftlog_client", "raftlog_contract", "raftlog", "membership"},
    # of the core: the batch codec only
    "raftlog_spark": {"raftlog_spark", "raftlog_client", "raftlog_contract", "raftlog"},
    "raftlog_cli": {
        "raftlog_cli",
        "raftlog_client",
        "raftlog_contract",
        "raftlog_bench",
        "raftlog_node",
        "raftlog_dev",
        "raftlog",
    },
}
PROJECT_PACKAGES = set(ALLOWED)
# The modules allowed past their package's rule: the transactional workload's negative control, which runs
# only inside a node process (jepsen.nodeshim loads it there) and breaks the state machine's marker apply;
# and the harness's control plane, which starts its nodes through raftlog_node.launch (a leaf that imports
# nothing of the server, as raftlog dev's supervisor does), so that a fork server forks them.
MODULE_EXCEPTIONS = {"jepsen/marker_fault.py": {"partitions"}, "jepsen/control.py": {"raftlog_node"}}


@functools.cache
def _parse(text: str, filename: str) -> tuple[ast.Module, tuple[ast.AST, ...]]:
    """A source's tree and its nodes, once: the rules below read the same files again and again."""
    tree = ast.parse(text, filename=filename)
    return tree, tuple(ast.walk(tree))


def _parsed(path: pathlib.Path) -> ast.Module:
    return _parse(path.read_text(encoding="utf-8"), str(path))[0]


def _walked(path: pathlib.Path) -> tuple[ast.AST, ...]:
    """``ast.walk`` of the file's tree, kept."""
    return _parse(path.read_text(encoding="utf-8"), str(path))[1]


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _project_modules() -> frozenset[str]:
    """Every module of the project: its Python files and the compiled extensions pyproject declares."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        extensions = tomllib.load(f)["tool"]["setuptools"].get("ext-modules", [])
    python = {_module_name(path) for pkg in ALLOWED for path in (ROOT / pkg).rglob("*.py")}
    return frozenset(python | {str(extension["name"]) for extension in extensions})


class RelativeImportError(Exception):
    """A relative import that names no module of the project: the checks would not know what it reaches."""


def _absolute(path: pathlib.Path, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` names, a relative one resolved against ``path``'s package."""
    if node.level == 0:
        return node.module or ""
    try:
        module = _module_name(path)
    except ValueError:
        raise RelativeImportError(
            f"{path}: a relative import outside the project ({ast.unparse(node)})"
        ) from None
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    if node.level - 1 >= len(package):
        raise RelativeImportError(f"{path}: {ast.unparse(node)} goes above the top-level package")
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(path: pathlib.Path) -> list[tuple[str, tuple[str, ...]]]:
    """Every import of ``path`` anywhere in it (TYPE_CHECKING blocks and function bodies included) as
    (absolute module, the names taken from it: empty for ``import m``). A relative import is resolved
    against the file's own package, so it cannot slip past a rule."""
    found: list[tuple[str, tuple[str, ...]]] = []
    for node in _walked(path):
        if isinstance(node, ast.Import):
            found += [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((_absolute(path, node), tuple(alias.name for alias in node.names)))
    return found


def _top_level_imports(path: pathlib.Path) -> set[str]:
    return {module.split(".")[0] for module, _ in _imports(path)}


def _imported_packages(path: pathlib.Path) -> set[str]:
    return _top_level_imports(path) & PROJECT_PACKAGES


def _sources() -> list[tuple[str, pathlib.Path]]:
    return [(pkg, path) for pkg in ALLOWED for path in sorted((ROOT / pkg).rglob("*.py"))]


@pytest.mark.parametrize(("package", "path"), _sources(), ids=lambda v: str(v).replace(str(ROOT) + "/", ""))
def test_imports_point_inward(package: str, path: pathlib.Path) -> None:
    excepted = MODULE_EXCEPTIONS.get(path.relative_to(ROOT).as_posix(), set())
    forbidden = _imported_packages(path) - ALLOWED[package] - excepted
    assert not forbidden, f"{path.relative_to(ROOT)} ({package}) imports {sorted(forbidden)}"


def test_only_the_node_shim_loads_the_harness_module_that_names_the_server() -> None:
    importers = {
        path.relative_to(ROOT).as_posix()
        for _, path in _sources()
        if "jepsen.marker_fault" in _imported_modules(path)
    }
    assert importers == {"jepsen/nodeshim.py"}, importers


def test_the_rule_catches_a_backward_import(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from api.app import build_app\nimport partitions.x\n", encoding="utf-8")
    assert _imported_packages(bad) - ALLOWED["raftlog"] == {"api", "partitions"}


def _imported_modules(path: pathlib.Path) -> set[str]:
    """The modules ``path`` imports: ``from p import m`` counts as ``p.m`` when ``p.m`` is a module of
    the project, and as ``p`` for the names ``p`` defines itself."""
    modules = _project_modules()
    found: set[str] = set()
    for module, names in _imports(path):
        if not names:
            found.add(module)
            continue
        submodules = {f"{module}.{name}" for name in names} & modules
        found.update(submodules)
        if len(submodules) < len(names):  # a name defined in the module itself
            found.add(module)
    return found


def test_a_relative_import_is_resolved_against_its_package() -> None:
    tree = ast.parse("from . import names\nfrom .groups.state import GroupTable\nfrom .. import api\n")
    imports = [node for node in tree.body if isinstance(node, ast.ImportFrom)]
    here = ROOT / "partitions" / "services.py"
    assert [_absolute(here, node) for node in imports[:2]] == ["partitions", "partitions.groups.state"]
    with pytest.raises(RelativeImportError):
        _absolute(here, imports[2])
    package = ROOT / "partitions" / "groups" / "__init__.py"
    assert _absolute(package, imports[1]) == "partitions.groups.groups.state"


CLIENT_MAY_USE_OF_RAFTLOG = {
    "raftlog.storage.batch",  # the pure batch codec
    "raftlog.storage.batch_reads",  # and its reading of fetch answers
    "raftlog.storage.errors",
    "raftlog.storage.partitioner",  # Kafka's key -> partition rule, as the server applies it
}


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "raftlog_client").rglob("*.py")) + sorted((ROOT / "raftlog_spark").rglob("*.py")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_the_clients_use_only_the_batch_codec_of_the_core(path: pathlib.Path) -> None:
    used = {m for m in _imported_modules(path) if m.split(".")[0] == "raftlog"}
    assert used <= CLIENT_MAY_USE_OF_RAFTLOG, f"{path.relative_to(ROOT)} imports {sorted(used)}"


# The server takes the wire contract's names from the leaf package both sides import, never from the client.
@pytest.mark.parametrize(
    "path",
    sorted(
        p for pkg in ("api", "kafka_api", "partitions", "raftlog_node") for p in (ROOT / pkg).rglob("*.py")
    ),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_the_server_imports_no_client(path: pathlib.Path) -> None:
    used = {m for m in _imported_modules(path) if m.split(".")[0] == "raftlog_client"}
    assert not used, f"{path.relative_to(ROOT)} imports {sorted(used)}: the contract is in raftlog_contract"


# What would make the core more than storage and consensus: HTTP (either side), a command line, a
# benchmark's load generation or process control.
NOT_IN_THE_CORE = {"aiohttp", "http", "urllib", "argparse", "subprocess", "raftlog_bench", "raftlog_cli"}


@pytest.mark.parametrize("path", sorted((ROOT / "raftlog").rglob("*.py")), ids=lambda p: p.name)
def test_the_core_holds_storage_and_consensus_only(path: pathlib.Path) -> None:
    used = _top_level_imports(path) & NOT_IN_THE_CORE
    assert not used, f"{path.relative_to(ROOT)} imports {sorted(used)}: raftlog/ is storage and consensus"


def test_no_benchmark_or_command_line_left_in_the_core() -> None:
    assert not (ROOT / "raftlog" / "bench").exists()
    assert not list((ROOT / "raftlog").rglob("cli*.py"))


def test_every_package_is_type_checked_and_installed() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    checked = next(
        line.split()[1:] for line in makefile.splitlines() if line.strip().startswith(".venv/bin/mypy")
    )
    assert set(ALLOWED) <= set(checked), f"make typecheck misses {sorted(set(ALLOWED) - set(checked))}"
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    missing = [
        pkg for pkg in ALLOWED if f'"{pkg}' not in pyproject.split("[tool.setuptools.packages.find]")[1]
    ]
    assert not missing, f"pyproject's packages miss {missing}"


def test_every_package_has_a_readme() -> None:
    missing = [pkg for pkg in ALLOWED if (ROOT / pkg).is_dir() and not (ROOT / pkg / "README.md").is_file()]
    assert not missing, f"packages without README.md: {missing}"


SPARK_ONLY = {"pyspark", "pyarrow", "pandas", "py4j"}  # the ``spark`` extra: never needed by a node


@pytest.mark.parametrize(
    ("package", "path"),
    [(pkg, path) for pkg, path in _sources() if pkg != "raftlog_spark"],
    ids=lambda v: str(v).replace(str(ROOT) + "/", ""),
)
def test_only_the_spark_connector_needs_the_spark_extra(package: str, path: pathlib.Path) -> None:
    used = _top_level_imports(path) & SPARK_ONLY
    assert not used, f"{path.relative_to(ROOT)} ({package}) imports {sorted(used)}: only raftlog_spark may"


def test_the_spark_rule_catches_a_node_importing_pyarrow(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import pyarrow as pa\nfrom pyspark.sql import SparkSession\n", encoding="utf-8")
    assert _top_level_imports(bad) & SPARK_ONLY == {"pyarrow", "pyspark"}


# -- the house: no import cycle, node-to-node calls in one place, front doors over the narrow protocols --


def _module_graph() -> dict[str, set[str]]:
    """Project module -> the project modules it imports anywhere (TYPE_CHECKING and function bodies
    included: a cycle hidden behind them is still two modules that need each other)."""
    paths = {_module_name(path): path for _, path in _sources()}
    return {
        module: {name for name in _imported_modules(path) if name in paths and name != module}
        for module, path in paths.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_two_modules_import_each_other() -> None:
    assert _cycles(_module_graph()) == []


def test_the_cycle_rule_catches_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


PEER_HOME = ROOT / "partitions" / "peers" / "client.py"  # the one home of node-to-node requests
API_PATH = re.compile(r"/(v1|topics|consumers|replication|internal|status|metrics|openapi)(/|\b)")


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of ``tree``: documentation may name paths, code may not."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _strings(path: pathlib.Path) -> list[str]:
    """Every string and bytes constant of ``path`` but its docstrings; an f-string's literal parts each
    count, so a path spelled around a placeholder is found too."""
    tree = _parsed(path)
    docstrings = _docstrings(tree)
    return [
        node.value if isinstance(node.value, str) else node.value.decode("latin-1")
        for node in _walked(path)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str | bytes)
        and id(node) not in docstrings
    ]


def _api_paths(path: pathlib.Path) -> list[str]:
    return [text for text in _strings(path) if API_PATH.search(text)]


@pytest.mark.parametrize(
    "path", sorted((ROOT / "partitions").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT / "partitions"))
)
def test_partitions_builds_no_url_of_the_http_api_and_speaks_http_in_one_place(path: pathlib.Path) -> None:
    paths = _api_paths(path)
    if path == PEER_HOME:
        assert paths == ["/internal/v1/"], "the peer client names the internal prefix, nothing else"
    else:
        assert not paths, f"{path.relative_to(ROOT)} spells paths of the HTTP API: {paths}"
        modules = {module for module, _ in _imports(path)} - {"urllib.parse"}  # joins URIs, speaks no HTTP
        used = {module.split(".")[0] for module in modules} & {"aiohttp", "urllib", "http", "requests"}
        assert not used, f"{path.relative_to(ROOT)} speaks HTTP ({sorted(used)}): only peers/client.py may"


def test_the_url_rule_finds_a_path_anywhere_in_a_string(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        '"""Documented: GET /v1/nodes."""\n'
        "def f(host, t):\n"
        '    """Calls POST /internal/v1/data/produce."""\n'
        '    url = f"http://{host}/internal/v1/data/{t}"\n'
        '    return [url, "http://" + host + "/topics/" + t, b"x/metrics"]\n',
        encoding="utf-8",
    )
    assert sorted(_api_paths(bad)) == ["/internal/v1/data/", "/topics/", "x/metrics"]


# -- one client package: only raftlog_client builds a path of the public API (and api/ routes them) --------

# a root of the public API's paths at the start of a string, after a space or after a URL's host
PUBLIC_API_PATH = re.compile(
    r"(?:^|\s|://[^/\s]*)(/(?:topics|consumers|brokers)\b|/(?:v1|status)/|/metrics\b|/openapi\.json)"
)
NOT_AN_API_PATH = {
    ("raftlog_bench/targets.py", "/metrics")
}  # a word of the sample log lines bench perf sends


def _outside_the_client() -> list[pathlib.Path]:
    # the client builds the paths; the server (its routes, its options' help) names them
    packages = [
        pkg for pkg in ALLOWED if pkg not in ("raftlog_client", "raftlog_contract", "api", "raftlog_node")
    ]
    found = [path for pkg in packages for path in (ROOT / pkg).rglob("*.py")]
    found += [path for folder in ("scripts", "examples") for path in (ROOT / folder).rglob("*.py")]
    return sorted(found)


def _public_api_paths(path: pathlib.Path) -> list[str]:
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    return [
        text
        for text in _strings(path)
        if PUBLIC_API_PATH.search(text) and (name, text) not in NOT_AN_API_PATH
    ]


@pytest.mark.parametrize("path", _outside_the_client(), ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_client_package_spells_a_path_of_the_public_api(path: pathlib.Path) -> None:
    spelled = _public_api_paths(path)
    assert not spelled, (
        f"{path.relative_to(ROOT)} spells paths of the public API {spelled}: build them with "
        "raftlog_contract, or call a client's method"
    )


def test_the_public_path_rule_finds_paths_and_only_paths(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def f(url, t, p, pid):\n"
        '    """GET /topics/{t}: a docstring may name it."""\n'
        '    a = f"{url}/topics/{t}/partitions/{p}"\n'
        '    b = "http://127.0.0.1:8081/v1/nodes"\n'
        '    c = url + "/status/ready"\n'
        '    d = "POST /consumers/g/offsets"\n'
        '    e = ["/api/v1/orders", f"/proc/{pid}/status", "/internal/v1/data/produce"]\n'
        '    e += ["topics", "x/metrics", "/topicsmore"]\n'
        "    return a, b, c, d, e\n",
        encoding="utf-8",
    )
    found = _public_api_paths(bad)
    assert sorted(found) == sorted(
        ["/topics/", "http://127.0.0.1:8081/v1/nodes", "/status/ready", "POST /consumers/g/offsets"]
    )


# What a front door may use of a node: the protocols, each on the ground floor of its room, and the types of
# their answers; the few limits and pure rules a door applies itself (the security model, consumer configs'
# limits, the group table's records); the cluster-wide services, the peer table (the server side of peer
# calls), the typed errors and the names. Never a room's machinery.
FRONT_DOOR_MAY_USE = {
    "partitions.data.service",
    "partitions.metadata.service",
    "partitions.consumers.protocol",
    "partitions.transactions.service",
    "partitions.transactions.errors",
    "partitions.registry.service",  # the schema registry's protocol and answers
    "partitions.registry.schema_types",  # a schema's references, the schema type names
    "partitions.registry.framing",  # Confluent's wire format of a key or value (the HTTP schema formats)
    "partitions.registry.schema_cache",  # registered schemas by id, parsed once per node
    "partitions.registry.table",  # the compatibility levels and modes (the registry's words)
    "partitions.controller.state",  # TopicMetadata, merge_configs
    "partitions.controller.defaults",  # the controller's defaults (a leaf): topics' partitions, replicas
    "partitions.topic_configs",  # a topic's configs as DescribeConfigs describes them (pure)
    "partitions.node_loggers",  # the node's loggers and levels, changed as Kafka's broker-loggers are
    "partitions.resource_configs",  # client metrics, group, broker throttle configs: keys and checks (pure)
    "partitions.controller.members",  # ControllerMembers
    "partitions.controller.reconfigure",  # MoveProgress, MemberView
    "partitions.controller.elections",  # what a preferred or unclean leader election does (pure)
    "partitions.replicas.log_dirs",  # a node's log directory and its replicas (MetadataView.log_dir)
    "partitions.replicas.failures",  # ReplicaFailure
    "partitions.groups.assignors",  # TopicPartition, the assignors' names
    "partitions.groups.group_model",  # ReadConfig and the consumer configs' limits
    "partitions.groups.coordinator",  # the coordinator the Kafka door registers its groups with
    "partitions.groups.errors",
    "partitions.groups.live",  # the protocol a door's own groups are seen through (LiveGroups)
    "partitions.groups.consumer.group",  # a consumer group heartbeat and its answer (KIP-848)
    "partitions.groups.consumer.coordinator",  # the consumer group protocol's coordinator
    "partitions.groups.consumer.topic_regex",  # what a regex resolves to and a description shows (Viewer)
    "partitions.groups.share.coordinator",  # share groups' membership (KIP-932)
    "partitions.groups.share.group",  # a share group heartbeat (KIP-932)
    "partitions.groups.streams.coordinator",  # streams groups' coordinator (KIP-1071)
    "partitions.groups.streams.group",  # a streams group heartbeat, its answer and the group described
    "partitions.groups.streams.reconcile",  # a member's tasks (active, standby, warm-up)
    "partitions.groups.streams.topology",  # a topology and the internal topics it needs
    "partitions.data.share_records",  # share groups' records, served by a partition's leader (KIP-932)
    "partitions.groups.share.offsets",  # share groups' offset admin rules (KIP-932)
    "partitions.groups.share.partition",  # acknowledge types, records in flight, ShareOffset
    "partitions.groups.classic.coordinator",  # the classic group protocol's coordinator (ClassicGroups)
    "partitions.groups.classic.members",  # its refusals
    "partitions.groups.classic_calls",  # the classic protocol's calls, whichever protocol runs the group
    "partitions.groups.consumer_protocol",  # the consumer protocol's subscription and assignment bytes
    "partitions.security.acls",
    "partitions.security.users",
    "partitions.security.tokens",
    "partitions.security.delegation_tokens",  # Kafka's delegation tokens: their times, HMACs, credentials
    "partitions.security.defaults",  # their lifetimes' defaults (a leaf)
    "partitions.controller.delegation_tokens",  # their commands, which the Kafka door makes
    "partitions.security.login_failures",
    "partitions.security.holds",
    "partitions.security.answer_holds",  # an answer's bytes in the listener's budget (both doors)
    "partitions.security.quotas",  # the client quota rule both doors apply (ClientQuotas)
    "partitions.controller.quotas",  # client quota entities, keys and Kafka's checks of them
    "partitions.features",  # the feature levels UpdateFeatures checks before it proposes
    "partitions.peers.cluster",
    "partitions.peers.client",
    "partitions.peer_ops",
    "partitions.errors",
    "partitions.names",
}
# what builds the node (its parts and the defaults of their settings) may use more
BUILDS_THE_NODE = {
    ROOT / "raftlog_node" / "serve.py": {
        "partitions.groups.consumer.coordinator",  # the consumer groups' session timeout
        "partitions.broker.node",
        "partitions.replicas.recovery",
        "partitions.controller.placement",
        "partitions.transactions.coordinator",
    },
}


FRONT_DOORS = sorted((ROOT / "api").rglob("*.py")) + sorted((ROOT / "kafka_api").rglob("*.py"))


@pytest.mark.parametrize("path", FRONT_DOORS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_front_door_asks_a_node_only_through_its_protocols(path: pathlib.Path) -> None:
    used = {m for m in _imported_modules(path) if m.split(".")[0] == "partitions"}
    allowed = FRONT_DOOR_MAY_USE | BUILDS_THE_NODE.get(path, set())
    assert used <= allowed, f"{path.relative_to(ROOT)} reaches into {sorted(used - allowed)}"


# A group's protocol steps: a class of a door that defines two of them runs a group's state machine, whose
# home is below the doors (partitions/groups/: the classic, consumer and HTTP groups' coordinators).
GROUP_PROTOCOL_STEPS = {"join", "sync", "heartbeat", "leave", "tick", "expire_due", "check_commit"}


def _group_state_machines(path: pathlib.Path) -> list[str]:
    found = []
    for node in _walked(path):
        if isinstance(node, ast.ClassDef):
            steps = {
                f.name for f in node.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            } & GROUP_PROTOCOL_STEPS
            if len(steps) >= 2:
                found.append(f"{node.name}: {', '.join(sorted(steps))}")
    return found


# The coordinators below the doors that hold a group's members, and the steps that run them on the clock:
# a door that builds one (a call, a dataclass field's default_factory) or ticks one owns a group's state.
GROUP_HOLDERS = {"ClassicGroups", "GroupCoordinator", "ConsumerGroupCoordinator", "ShareGroupCoordinator"}
GROUP_CLOCK_STEPS = {"tick", "expire_due"}


def _group_state_held(path: pathlib.Path) -> list[str]:
    """Each line where ``path`` builds a group coordinator or runs one's clock."""
    found = []
    for node in _walked(path):
        if not isinstance(node, ast.Call):
            continue
        named = _names(node.func) & (GROUP_HOLDERS | GROUP_CLOCK_STEPS)
        factories = [k.value for k in node.keywords if k.arg == "default_factory"]
        named |= set().union(*(_names(f) for f in factories)) & GROUP_HOLDERS
        found += [f"{path.name}:{node.lineno}: {name}" for name in sorted(named)]
    return found


@pytest.mark.parametrize("path", FRONT_DOORS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_front_door_owns_no_group_state_machine(path: pathlib.Path) -> None:
    """A door translates a group request to the coordinator below it (partitions/groups/) and back: it
    defines no group's protocol steps, and neither builds nor ticks the coordinators that hold a group's
    members (the node does: ``GroupCoordinator.classic``, ``run``)."""
    assert _group_state_machines(path) == []
    assert _group_state_held(path) == []


def test_the_broker_speaks_no_kafka_wire() -> None:
    """kio's classes and error codes are the Kafka door's: what a state machine below the doors answers a
    Kafka client (the classic group coordinator's ``GroupCode``) is its own, and the door translates it."""
    found = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in sorted((ROOT / "partitions").rglob("*.py"))
        for module, _ in _imports(path)
        if module.split(".")[0] == "kio"
    ]
    assert found == []


def test_the_group_state_machine_rule_catches_one(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "class Groups:\n    def join(self): ...\n    async def heartbeat(self): ...\n"
        "class Admission:\n    def leave(self): ...\n",
        encoding="utf-8",
    )
    assert _group_state_machines(bad) == ["Groups: heartbeat, join"]
    assert _group_state_machines(ROOT / "partitions" / "groups" / "classic" / "coordinator.py") != []
    held = tmp_path / "held.py"
    held.write_text(
        "groups: ClassicGroups = field(default_factory=ClassicGroups)\n"
        "door.groups.tick(now)\ncoordinator = GroupCoordinator(log)\n",
        encoding="utf-8",
    )
    assert _group_state_held(held) == [
        "held.py:1: ClassicGroups",
        "held.py:2: tick",
        "held.py:3: GroupCoordinator",
    ]


def _second_writes(path: pathlib.Path) -> list[str]:
    """Methods that append records beside ``produce_batch``: a ``produce`` (or ``produce_*``) of a class."""
    return [
        f"{node.name}.{f.name}"
        for node in _walked(path)
        if isinstance(node, ast.ClassDef)
        for f in node.body
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
        and (f.name == "produce" or f.name.startswith("produce_"))
        and f.name != "produce_batch"
    ]


def test_records_have_one_write() -> None:
    """Every door's records reach a partition through ``DataService.produce_batch`` (the HTTP door encodes
    its JSON records into a batch), so a produced batch meets every rule in one place: no service, stub or
    door class keeps a write of its own."""
    found = [
        f"{path.relative_to(ROOT)}: {line}"
        for package in ("partitions", "api", "kafka_api")
        for path in sorted((ROOT / package).rglob("*.py"))
        for line in _second_writes(path)
    ]
    assert found == []


def test_the_one_write_rule_catches_a_second(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "class Remote:\n    async def produce(self): ...\n    async def produce_batch(self): ...\n"
        "async def produce(door, request): ...\n",
        encoding="utf-8",
    )
    assert _second_writes(bad) == ["Remote.produce"]


def _names_the_pickling_transport(path: pathlib.Path) -> bool:
    for node in _walked(path):
        imported = isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pysyncobj")
        if imported and any(alias.name == "TCPTransport" for alias in node.names):  # type: ignore[attr-defined]
            return True
        if isinstance(node, ast.Attribute) and node.attr == "TCPTransport":
            return True
    return False


def test_no_product_code_reaches_pysyncobjs_pickling_transport() -> None:
    """ADR 0002: stock pysyncobj's TCPTransport unpickles what it receives. A Raft core has no default
    transport; only tests and benchmarks against stock pysyncobj name that one."""
    found = [
        str(path.relative_to(ROOT))
        for package in PROJECT_PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if _names_the_pickling_transport(path)
    ]
    assert found == []
    assert _names_the_pickling_transport(
        ROOT / "tests" / "consensus" / "acked_write_scenario.py"
    )  # it sees one


# -- the broker's rooms: one folder each, imports running one way ------------------------------------------

# bottom to top: a module of partitions/ imports only modules of its own room or of the rooms below it. The
# modules directly in partitions/ are the ground floor every room stands on.
BROKER_ROOMS = (
    "partitions",  # errors, names, the partition command codec, the peer-operation declaration, the workers
    "partitions.security",  # ACLs, users, tokens, failed logins, what a user may hold (pure)
    "partitions.controller",  # the controller's replicated metadata and its pure logic
    "partitions.groups",  # the group table, the assignors, the coordinator
    "partitions.transactions",  # the transactional ids' table, the transaction coordinator
    "partitions.registry",  # the schema registry: schema types, the table in __schemas, its service
    "partitions.replicas",  # this node's partition replicas, their state machine, recovery and routing
    "partitions.metadata",  # the controller's host on a node, its operations, MetadataView, AdminService
    "partitions.data",  # the data plane (DataService) and a partition's state and leadership
    "partitions.consumers",  # groups stored in __consumer_groups partitions, HTTP consumers (GroupService)
    "partitions.peers",  # calls between nodes and the cluster-wide services
    "partitions.operations",  # the controller leader's operator, acting through peer calls
    "partitions.broker",  # the node, its rooms composed
)


def _room(module: str) -> str:
    parts = module.split(".")
    room = ".".join(parts[:2]) if len(parts) > 2 else parts[0]
    assert room in BROKER_ROOMS, f"{module} stands in no room of BROKER_ROOMS: add its folder there"
    return room


def _broker_graph() -> dict[str, set[str]]:
    return {
        module: {name for name in imported if name.split(".")[0] == "partitions"}
        for module, imported in _module_graph().items()
        if module.split(".")[0] == "partitions"
        and module not in BROKER_ROOMS  # a room's __init__: a docstring
    }


def _imports_above(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a module of a room above the importer's, as "importer -> imported"."""
    floor = {room: number for number, room in enumerate(BROKER_ROOMS)}
    return sorted(
        f"{module} -> {name}"
        for module, imported in graph.items()
        for name in imported
        if floor[_room(name)] > floor[_room(module)]
    )


def test_the_broker_s_rooms_import_only_downward() -> None:
    assert _imports_above(_broker_graph()) == []


def test_every_room_is_a_folder_with_a_docstring_and_every_folder_a_room() -> None:
    """A folder in a room's folder is a part of that room (partitions/groups/classic/: one protocol's
    modules), on its floor, and says what it holds too."""
    folders = {
        _module_name(path.parent / "__init__.py")
        for path in (ROOT / "partitions").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert {folder for folder in folders if folder.count(".") <= 1} == set(BROKER_ROOMS)
    for folder in folders:
        init = ROOT.joinpath(*folder.split("."), "__init__.py")
        assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), (
            f"{folder} says not what it holds"
        )


def test_within_a_room_no_module_imports_one_above_it() -> None:
    """The modules of one folder stand on floors: none imports a module that imports it, however far round."""
    graph = _broker_graph()
    for room in BROKER_ROOMS:
        inside = {m: {n for n in graph[m] if _room(n) == room} for m in graph if _room(m) == room}
        assert _cycles(inside) == [], f"{room}: modules that stand above each other"


def test_the_room_rule_catches_an_import_from_above() -> None:
    graph = {
        "partitions.errors": set(),
        "partitions.replicas.manager": {"partitions.errors", "partitions.peers.client"},
        "partitions.peers.client": {"partitions.errors"},
    }
    assert _imports_above(graph) == ["partitions.replicas.manager -> partitions.peers.client"]


def _re_exports(path: pathlib.Path) -> list[str]:
    """``from m import name as name``: the idiom that re-exports a name for others to import from here."""
    return [
        f"{node.module}.{alias.name}"
        for node in _walked(path)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    ]


@pytest.mark.parametrize(
    "path", sorted((ROOT / "partitions").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT / "partitions"))
)
def test_the_broker_re_exports_nothing(path: pathlib.Path) -> None:
    """Each name is imported from the module that defines it: a room's protocols stand on its own floor."""
    assert _re_exports(path) == []


def test_the_re_export_rule_catches_one(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from partitions.security.acls import AclBinding as AclBinding, select\n", encoding="utf-8"
    )
    assert _re_exports(bad) == ["partitions.security.acls.AclBinding"]


# -- classes of one job -----------------------------------------------------------------------------------

METHODS_MAX = 40


def _large_classes(path: pathlib.Path, module: str) -> list[str]:
    found = []
    for node in _walked(path):
        if isinstance(node, ast.ClassDef):
            methods = [f for f in node.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)]
            if len(methods) > METHODS_MAX:
                found.append(f"{module}.{node.name}: {len(methods)} methods")
    return found


def test_no_class_owns_more_than_forty_methods() -> None:
    """A class past forty methods owns several jobs: split it by job (as RaftCore was, into a class per job
    over its shared state: no class is exempt)."""
    found = [line for _, path in _sources() for line in _large_classes(path, _module_name(path))]
    assert found == []


def test_the_class_size_rule_catches_a_large_class(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("class Big:\n" + "".join(f"    def m{i}(self): ...\n" for i in range(41)), "utf-8")
    assert _large_classes(bad, "bad") == ["bad.Big: 41 methods"]


def clashing_test_modules(tests: pathlib.Path) -> dict[str, list[str]]:
    """Test modules pytest imports by bare name (no __init__.py above them) that share that name."""
    by_name: dict[str, list[str]] = {}
    for path in sorted(tests.rglob("test_*.py")):
        if not (path.parent / "__init__.py").exists():
            by_name.setdefault(path.stem, []).append(str(path.relative_to(tests)))
    return {name: paths for name, paths in by_name.items() if len(paths) > 1}


def test_no_two_test_modules_share_a_bare_name() -> None:
    # the whole suite collects them together, and the second of two fails to import ("import file mismatch")
    assert clashing_test_modules(ROOT / "tests") == {}


def test_the_test_name_rule_catches_a_clash(tmp_path: pathlib.Path) -> None:
    for folder in ("a", "b", "c"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "test_same.py").write_text("")
    (tmp_path / "c" / "__init__.py").write_text("")
    assert clashing_test_modules(tmp_path) == {"test_same": ["a/test_same.py", "b/test_same.py"]}


# What building a node's command line may load (``raftlog dev``, the fault harness, ``raftlog serve
# --help``): the option table and the leaves it names, declarations only. The node's stack (its Raft
# engine, aiohttp, kio, the doors' handlers) is loaded only by the node that runs it.
COMMAND_LINE_MODULES = (
    "import raftlog_node.options, raftlog_dev.dev, raftlog_dev.layout; import sys; "
    "print(' '.join(sorted(sys.modules)))"
)
NEVER_FOR_A_COMMAND_LINE = ("aiohttp", "kio", "pysyncobj", "membership", "api.app", "kafka_api.server")
LEAF_SUFFIXES = (".defaults", ".errors")
LEAVES = {
    "api.http_settings", "kafka_api.limits", "kafka_api.share_sessions", "partitions.groups.assignors",
    "partitions.security.holds", "partitions.security.login_failures", "partitions.security.tokens",
    "raftlog.gc_pauses", "raftlog.histogram", "raftlog.loop_lag",
    "raftlog.storage.dirlock", "raftlog.storage.closing",  # raftlog dev's lock of its data folder
}  # fmt: skip


def test_building_a_command_line_loads_only_the_option_table_and_its_leaves() -> None:
    """The option table imports each room's defaults from a leaf of that room, never the module that uses
    them: before, ``import raftlog_node.options`` loaded 114 modules of the broker, aiohttp and kio (0.9
    CPU seconds) for every ``raftlog dev`` and fault harness process."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", COMMAND_LINE_MODULES], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = done.stdout.split()
    heavy = [m for m in loaded if any(m == n or m.startswith(n + ".") for n in NEVER_FOR_A_COMMAND_LINE)]
    assert not heavy, f"building a command line loads the server: {heavy}"
    server = [
        m
        for m in loaded
        if m.split(".")[0] in ("api", "kafka_api", "partitions", "raftlog")
        and "." in m
        and not m.endswith(LEAF_SUFFIXES)
        and m not in LEAVES
        and not (ROOT / m.replace(".", "/") / "__init__.py").is_file()
    ]
    assert not server, f"the option table reaches modules that are not leaves: {server}"


# -- the Kafka door: a flat row of handlers over shared helpers, one error boundary -----------------------

KAFKA_API_TABLE = ROOT / "kafka_api" / "apis.py"


def _handler_modules(table: pathlib.Path) -> set[str]:
    """The modules the API table dispatches to: those it imports a name from that it passes an ``Api(...)``
    as its handler (the fifth argument, or ``handler=``)."""
    imported: dict[str, str] = {}
    for module, names in _imports(table):
        imported.update((name, module) for name in names)
    found = set()
    for node in _walked(table):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Api":
            given = node.args[4] if len(node.args) > 4 else None
            given = next((k.value for k in node.keywords if k.arg == "handler"), given)
            if isinstance(given, ast.Name) and given.id in imported:
                found.add(imported[given.id])
    return found


def _imports_of_handlers(
    table: pathlib.Path, modules: dict[str, pathlib.Path], table_module: str = "kafka_api.apis"
) -> list[str]:
    """Each import of a handler module by a module other than the table, as "importer -> handler"."""
    handlers = _handler_modules(table)
    return sorted(
        f"{module} -> {imported}"
        for module, path in modules.items()
        if module != table_module
        for imported in _imported_modules(path) & handlers
        if imported != module
    )


def test_the_api_table_dispatches_to_handler_modules_that_import_no_other() -> None:
    """A Kafka API is one file and one row: a handler module (``*_apis.py`` and the others the ``APIS``
    table takes a handler from) is imported by the table alone, so no handler stands on another's helpers,
    private or public; what two handlers share lives in a module below them (``topics``,
    ``coordinators``, ``group_describe``, ``resource_configs``, ``errors``...)."""
    handlers = _handler_modules(KAFKA_API_TABLE)
    assert {"kafka_api.fetch", "kafka_api.metadata", "kafka_api.group_apis"} <= handlers  # it reads the table
    assert all(m.endswith("_apis") for m in handlers if "_apis" in m)
    modules = {_module_name(path): path for path in sorted((ROOT / "kafka_api").rglob("*.py"))}
    assert _imports_of_handlers(KAFKA_API_TABLE, modules) == []


def test_the_handler_rule_catches_a_handler_importing_another(tmp_path: pathlib.Path) -> None:
    table = tmp_path / "apis.py"
    table.write_text(
        "from kafka_api.fetch import fetch\nfrom kafka_api.metadata import metadata\n"
        "from kafka_api.wire import build\n"
        'APIS = (Api(1, "Fetch", 4, 17, fetch, "READ topic"), Api(3, "Metadata", 0, 13, handler=metadata,'
        ' acls=""))\n',
        encoding="utf-8",
    )
    fetch = tmp_path / "fetch.py"
    fetch.write_text(
        "from kafka_api.metadata import topic_names_by_id\nfrom kafka_api import wire\n", "utf-8"
    )
    helper = tmp_path / "helper.py"
    helper.write_text("from kafka_api import metadata\n", encoding="utf-8")
    modules = {"kafka_api.apis": table, "kafka_api.fetch": fetch, "kafka_api.topics": helper}
    assert _handler_modules(table) == {"kafka_api.fetch", "kafka_api.metadata"}
    assert _imports_of_handlers(table, modules) == [
        "kafka_api.fetch -> kafka_api.metadata",
        "kafka_api.topics -> kafka_api.metadata",
    ]


# Where the Kafka door may catch every error: its one boundary of an item's error (``errors.Caught``), and
# the server's and the wire's edges. A handler maps errors through ``Caught``, never by hand.
BROAD_CATCH_BOUNDARIES = {
    "kafka_api/errors.py": "Caught: an item's error (a partition's, a group's...) becomes its answer",
    "kafka_api/server.py": "a request's handler or answer that fails (a bug) closes its connection; the "
    "listener's ticks go on past a failed one",
    "kafka_api/wire.py": "kio's reader raises its own errors and its C extension's: a malformed request",
}
BROAD_CATCHES_MAX = 10
BROAD = {"Exception", "BaseException"}


def _names(node: ast.expr | None) -> set[str]:
    if node is None:
        return {"BaseException"}  # a bare ``except:``
    if isinstance(node, ast.Tuple):
        return set().union(*(_names(element) for element in node.elts))
    if isinstance(node, ast.Attribute):
        return {node.attr}
    return {node.id} if isinstance(node, ast.Name) else set()


def _swallows(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A context manager's exit that may return true: it may swallow the error it is given."""
    return any(
        isinstance(node, ast.Return)
        and not (isinstance(node.value, ast.Constant) and node.value.value in (None, False))
        and node.value is not None
        for node in ast.walk(function)
    )


EXITS = ("__exit__", "__aexit__")


def _broad_catches(path: pathlib.Path) -> list[int]:
    """The lines where ``path`` catches every error: ``except Exception`` (or ``BaseException``, bare, in a
    tuple) but a clean-up that raises it again, ``suppress(Exception)``, and a context manager's exit that
    may swallow what it is given."""
    found = []
    for node in _walked(path):
        if isinstance(node, ast.ExceptHandler) and _names(node.type) & BROAD:
            last = node.body[-1]
            if not (isinstance(last, ast.Raise) and last.exc is None):
                found.append(node.lineno)
        elif isinstance(node, ast.Call) and _names(node.func) & {"suppress"}:
            if any(_names(arg) & BROAD for arg in node.args):
                found.append(node.lineno)
        elif (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name in EXITS
            and _swallows(node)
        ):
            found.append(node.lineno)
    return sorted(found)


def test_the_kafka_door_catches_every_error_only_at_its_boundaries() -> None:
    found = {
        path.relative_to(ROOT).as_posix(): lines
        for path in sorted((ROOT / "kafka_api").rglob("*.py"))
        if (lines := _broad_catches(path))
    }
    outside = {path: lines for path, lines in found.items() if path not in BROAD_CATCH_BOUNDARIES}
    assert outside == {}, "catch an item's error with errors.Caught, not by hand"
    total = sum(len(lines) for lines in found.values())
    assert total <= BROAD_CATCHES_MAX, f"{total} broad catches in kafka_api/: {found}"


def test_the_broad_catch_rule_catches_each_form(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import contextlib\n"
        "def f():\n"
        "    try:\n        g()\n    except Exception:\n        pass\n"  # 5
        "    try:\n        g()\n    except (KeyError, BaseException) as exc:\n        h(exc)\n"  # 9
        "    try:\n        g()\n    except:\n        return 1\n"  # 13
        "    try:\n        g()\n    except BaseException:\n        close()\n        raise\n"  # re-raised
        "    with contextlib.suppress(Exception):\n        g()\n"  # 20
        "    with contextlib.suppress(KeyError):\n        g()\n"
        "class Swallows:\n    def __exit__(self, *exc):\n        return True\n"  # 25
        "class Passes:\n    def __exit__(self, *exc):\n        return None\n",
        encoding="utf-8",
    )
    assert _broad_catches(bad) == [5, 9, 13, 20, 25]
