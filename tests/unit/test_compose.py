"""Consistency of the multi-container deployment in docker/, read as files (no Docker engine needed).

Each rule is a function returning the problems it finds in the compose file; each test asserts the real file has
none, then breaks a copy of it and asserts the rule notices, so no rule passes vacuously.
"""

from __future__ import annotations

import base64
import copy
import importlib.util
import json
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
TAG = "rebalance-planner:${TAG:-dev}"
ENV_FILE = "airflow.env"
# Must be one value across Airflow components (Airflow docs, "JWT Token Authentication" and "Configuration
# Reference"): a per-process jwt_secret makes the execution API reject task tokens ("Invalid auth token").
SHARED_SECRETS = ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__API__SECRET_KEY")
REQUIRED_ENV = (*SHARED_SECRETS, "AIRFLOW__CORE__EXECUTION_API_SERVER_URL", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")
# A secret's name (a *_FILE setting names a path, not a secret).
SECRET_NAME = re.compile(r"^(?!.*_FILE$).*(SECRET|PASSWORD|FERNET|JWT|TOKEN|_KEY$|SQL_ALCHEMY_CONN)")
# Who needs which secret: every Airflow component the shared ones and the database URL (its password inside);
# Postgres its own password; the processes that read Kafka (the scheduler runs the tasks; the command) its
# credentials. Every other service gets none.
AIRFLOW_SECRETS = frozenset({*SHARED_SECRETS, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"})
KAFKA_SECRETS = frozenset({"REBALANCE_KAFKA_SASL_PASSWORD", "REBALANCE_KAFKA_SSL_KEY_PASSWORD"})
NEEDS = {
    "airflow-init": AIRFLOW_SECRETS,
    "airflow-api-server": AIRFLOW_SECRETS,
    "airflow-dag-processor": AIRFLOW_SECRETS,
    "airflow-scheduler": AIRFLOW_SECRETS | KAFKA_SECRETS,
    "postgres": frozenset({"POSTGRES_PASSWORD"}),
    "rebalance": KAFKA_SECRETS,
}
# Ports a service may publish on every host address: only the api-server asks for a password (and it does not).
AUTHENTICATED_PORTS: dict[str, set[int]] = {"airflow-api-server": {8080}}
# Memory arithmetic of compose.yaml's header: JVM non-heap per JVM, Python per core (or per task process), the
# Spark daemon's own share, the scheduler's own processes.
JVM_OVERHEAD = 384 << 20
PYTHON_PER_CORE = 512 << 20
DAEMON_EXTRA = 256 << 20
SCHEDULER_OWN = 1 << 30
SIZED = ("spark.cores.max", "spark.executor.memory", "spark.driver.memory")
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"


def load_compose() -> dict:
    """compose.yaml with YAML anchors expanded into independent copies (a JSON round trip unshares them)."""
    return json.loads(json.dumps(yaml.safe_load((DOCKER / "compose.yaml").read_text())))


COMPOSE = load_compose()


@pytest.fixture
def compose() -> dict:
    return copy.deepcopy(COMPOSE)


# ---- reading services -------------------------------------------------------------------------------------------


def words(service: dict) -> list[str]:
    """The service's entrypoint and command as argv words."""
    argv: list[str] = []
    for key in ("entrypoint", "command"):
        value = service.get(key) or []
        argv += shlex.split(value) if isinstance(value, str) else list(value)
    return argv


def env(service: dict) -> dict[str, str]:
    value = service.get("environment") or {}
    if isinstance(value, list):
        return dict(item.split("=", 1) for item in value)
    return {k: "" if v is None else str(v) for k, v in value.items()}


def env_files(service: dict) -> tuple[str, ...]:
    value = service.get("env_file") or []
    value = [value] if isinstance(value, str | dict) else value
    return tuple(item["path"] if isinstance(item, dict) else item for item in value)


def mounts(service: dict) -> dict[str, str]:
    """Container path -> volume (or host path) of every mount."""
    found = {}
    for item in service.get("volumes") or []:
        if isinstance(item, dict):
            found[item["target"]] = item.get("source", "")
        else:
            source, target = item.split(":")[:2]
            found[target] = source
    return found


def names_of(name: str, service: dict) -> set[str]:
    """What other containers may call this one: the service name, its hostname, its container name."""
    return {name, service.get("hostname", name), service.get("container_name", name)}


def airflow_services(c: dict) -> dict[str, dict]:
    return {n: s for n, s in c["services"].items() if words(s)[:1] == ["airflow"]}


def spark_services(c: dict) -> dict[str, dict]:
    return {n: s for n, s in c["services"].items() if {"spark-class", "spark-submit"} & set(words(s))}


def submit_conf(service: dict) -> dict[str, str]:
    """The `--conf key=value` pairs of a spark-submit command."""
    argv = words(service)
    return dict(argv[i + 1].split("=", 1) for i, word in enumerate(argv[:-1]) if word == "--conf")


def spark_conf_setting(value: str) -> dict[str, str]:
    """REBALANCE_SPARK_CONF as the project reads it: a JSON object or `key=value,key=value`."""
    if value.lstrip().startswith("{"):
        return {k: str(v) for k, v in json.loads(value).items()}
    return dict(pair.strip().split("=", 1) for pair in value.split(",") if pair.strip())


def option(argv: list[str], flag: str, default: str = "") -> str:
    return argv[argv.index(flag) + 1] if flag in argv else default


def spark_drivers(c: dict) -> dict[str, dict[str, str]]:
    """Services that run a Spark driver, with the Spark settings they give it.

    A driver is a spark-submit command, or a process that builds a classic session against the cluster
    (REBALANCE_SPARK_MASTER=spark://...); a Spark Connect client (REBALANCE_SPARK_REMOTE) is not one.
    """
    drivers = {}
    for name, service in c["services"].items():
        if "spark-submit" in words(service):
            drivers[name] = submit_conf(service)
        elif env(service).get("REBALANCE_SPARK_MASTER", "").startswith("spark://"):
            drivers[name] = spark_conf_setting(env(service).get("REBALANCE_SPARK_CONF", ""))
    return drivers


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of docker/Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (DOCKER / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def image_env() -> dict[str, str]:
    return dict(
        token.split("=", 1) for op, args in dockerfile_instructions() if op == "ENV" for token in shlex.split(args)
    )


def env_example(name: str = ENV_FILE) -> dict[str, str]:
    lines = (DOCKER / f"{name}.example").read_text().splitlines()
    pairs = [line.split("=", 1) for line in lines if "=" in line and not line.startswith("#")]
    assert len({k for k, _ in pairs}) == len(pairs), f"a variable set twice in {name}.example"
    return dict(pairs)


def env_file_names(name: str) -> set[str]:
    """Every variable an env file may carry: set in its example, or offered there commented out (`# NAME=`)."""
    example = DOCKER / f"{name}.example"
    lines = example.read_text().splitlines() if example.is_file() else []
    return {m[1] for line in lines if (m := re.match(r"#? ?([A-Z][A-Z0-9_]*)=", line))}


def is_one_shot(name: str, c: dict) -> bool:
    """A command that runs and exits: waited for with service_completed_successfully, or only run on demand."""
    waited = any(
        isinstance(deps, dict) and (deps.get(name) or {}).get("condition") == "service_completed_successfully"
        for deps in (s.get("depends_on") for s in c["services"].values())
    )
    return waited or "cli" in (c["services"][name].get("profiles") or [])


def long_running(c: dict) -> dict[str, dict]:
    return {n: s for n, s in c["services"].items() if not is_one_shot(n, c)}


def size(text: str | int) -> int:
    """Bytes of a Docker or Spark size: 512m, 1g, 1536m, 5g (binary units, as both read them)."""
    if isinstance(text, int):
        return text
    match = re.fullmatch(r"(\d+)([kmg]?)b?", str(text).strip().lower())
    assert match, f"not a size: {text!r}"
    return int(match[1]) << {"": 0, "k": 10, "m": 20, "g": 30}[match[2]]


def mem_limit(service: dict) -> int | None:
    limit = service.get("mem_limit") or ((service.get("deploy") or {}).get("resources") or {}).get("limits", {})
    if isinstance(limit, dict):
        limit = limit.get("memory")
    return size(limit) if limit else None


# ---- the rules ---------------------------------------------------------------------------------------------------


def shared_secret_problems(c: dict) -> list[str]:
    """Every Airflow service reads the one shared env file first; no service sets a secret itself."""
    problems = []
    airflow = airflow_services(c)
    if not airflow:
        return ["no Airflow service"]
    for name, service in airflow.items():
        if env_files(service)[:1] != (ENV_FILE,):
            problems.append(f"{name}: env_file is {env_files(service)}, not ({ENV_FILE!r}, ...)")
    for name, service in c["services"].items():
        for key in env(service):
            if SECRET_NAME.search(key) or key in REQUIRED_ENV:
                problems.append(f"{name}: sets {key} itself instead of reading it from an env file")
    return problems


def secrets_reaching(service: dict) -> set[str]:
    """The secret variables a service receives: from its env files (as their examples define them) and inline."""
    names = {n for f in env_files(service) for n in env_file_names(f)} | set(env(service))
    return {n for n in names if SECRET_NAME.search(n)}


def secret_scope_problems(c: dict) -> list[str]:
    """No secret reaches a service that does not need it; every env file has an example make_env.py renders."""
    make_env = load_make_env()
    problems = []
    for name, service in c["services"].items():
        for file in env_files(service):
            if not (DOCKER / f"{file}.example").is_file() or file not in make_env.FILES:
                problems.append(f"{name}: env_file {file} has no {file}.example that make_env.py writes")
        extra = secrets_reaching(service) - NEEDS.get(name, frozenset())
        if extra:
            problems.append(f"{name}: receives {sorted(extra)}, which it does not need")
    return problems


def published_host_ip(port: str | int | dict) -> str | None:
    """The host address of a `ports` entry (short `ip:host:container` or long syntax); None means every address."""
    if isinstance(port, dict):
        return port.get("host_ip")
    return str(port).rsplit(":", 2)[0] if str(port).count(":") >= 2 else None


def container_port(port: str | int | dict) -> int:
    if isinstance(port, dict):
        return int(port["target"])
    return int(str(port).rsplit(":", 1)[-1].split("/")[0])


def port_problems(c: dict) -> list[str]:
    """A published port binds 127.0.0.1, unless it is one that asks for a password (the api-server's)."""
    problems = []
    for name, service in c["services"].items():
        for port in service.get("ports") or []:
            authenticated = container_port(port) in AUTHENTICATED_PORTS.get(name, set())
            if published_host_ip(port) != "127.0.0.1" and not authenticated:
                problems.append(f"{name}: port {port} is not bound to 127.0.0.1")
    return problems


def health_problems(c: dict) -> list[str]:
    """Every long-running service has a health check and restarts unless stopped; whoever waits for one waits for
    it to be healthy (a started JVM or scheduler is not yet one that answers)."""
    problems = []
    running = long_running(c)
    for name, service in running.items():
        test = (service.get("healthcheck") or {}).get("test")
        if not test or test == ["NONE"] or service["healthcheck"].get("disable"):
            problems.append(f"{name}: no health check")
        if service.get("restart") not in ("unless-stopped", "always"):
            problems.append(f"{name}: restart is {service.get('restart')!r}, not unless-stopped")
    for name, service in c["services"].items():
        deps = service.get("depends_on") or {}
        for dep in deps:
            condition = deps[dep].get("condition") if isinstance(deps, dict) else "service_started"
            if dep in running and condition != "service_healthy":
                problems.append(f"{name}: waits for {dep} with {condition}, not service_healthy")
    for name, service in c["services"].items():
        if mem_limit(service) is None:
            problems.append(f"{name}: no memory limit")
    return problems


def image_problems(c: dict) -> list[str]:
    """One service builds the project image; every other project container runs that same tag, never pulled."""
    builders = [n for n, s in c["services"].items() if "build" in s]
    problems = [] if len(builders) == 1 else [f"{len(builders)} services build an image: {builders}"]
    for name in builders:
        build = c["services"][name]["build"]
        if c["services"][name].get("image") != TAG:
            problems.append(f"{name}: builds without tagging {TAG}")
        if not (DOCKER / build["context"] / build["dockerfile"]).is_file():
            problems.append(f"{name}: {build} names no Dockerfile")
    for name, service in c["services"].items():
        project = words(service)[:1] in (["airflow"], ["spark-class"], ["spark-submit"], ["rebalance"])
        if name in builders or not (project or service.get("image", "").startswith("rebalance-planner")):
            continue
        if service.get("image") != TAG:
            problems.append(f"{name}: image {service.get('image')!r} is not {TAG}")
        if service.get("pull_policy") != "never":
            problems.append(f"{name}: pull_policy {service.get('pull_policy')!r}: the image is built here, not pulled")
    return problems


def driver_problems(c: dict) -> list[str]:
    """Executors connect back to the driver: it must advertise its own service name and listen beyond loopback."""
    problems = []
    drivers = spark_drivers(c)
    for name, conf in drivers.items():
        service = c["services"][name]
        if conf.get("spark.driver.host") not in names_of(name, service):
            problems.append(f"{name}: spark.driver.host is {conf.get('spark.driver.host')!r}, not its own name")
        if conf.get("spark.driver.bindAddress") != "0.0.0.0":
            problems.append(f"{name}: spark.driver.bindAddress is {conf.get('spark.driver.bindAddress')!r}")
    for name, service in airflow_services(c).items():
        runs_tasks = words(service)[1:2] == ["scheduler"] and env(service).get("AIRFLOW__CORE__EXECUTOR") in (
            "LocalExecutor",
            None,
        )
        if runs_tasks and name not in drivers and "REBALANCE_SPARK_REMOTE" not in env(service):
            problems.append(f"{name}: runs the tasks but uses neither the Spark cluster nor Spark Connect")
    masters = {
        f"spark://{option(words(s), '--host', n)}:{option(words(s), '--port', '7077')}"
        for n, s in c["services"].items()
        if MASTER_CLASS in words(s)
    }
    for name, service in c["services"].items():
        urls = [w for w in words(service) if w.startswith("spark://")]
        urls += [v for k, v in env(service).items() if k == "REBALANCE_SPARK_MASTER" and v.startswith("spark://")]
        problems += [
            f"{name}: master {url} is not the master service's {masters}" for url in urls if url not in masters
        ]
    return problems


def connect_problems(c: dict) -> list[str]:
    """The Connect server exists, listens beyond loopback on the port REBALANCE_SPARK_REMOTE names."""
    servers = {n: s for n, s in c["services"].items() if CONNECT_CLASS in words(s)}
    if len(servers) != 1:
        return [f"{len(servers)} Spark Connect services"]
    ((name, service),) = servers.items()
    conf = submit_conf(service)
    port = int(conf.get("spark.connect.grpc.binding.port", 15002))
    problems = [] if conf.get("spark.connect.grpc.binding.address") == "0.0.0.0" else [f"{name}: gRPC not on 0.0.0.0"]
    remotes = {
        n: env(s)["REBALANCE_SPARK_REMOTE"] for n, s in c["services"].items() if "REBALANCE_SPARK_REMOTE" in env(s)
    }
    for client, remote in remotes.items():
        url = urlsplit(remote)
        if url.scheme != "sc" or url.hostname not in names_of(name, service) or url.port != port:
            problems.append(f"{client}: REBALANCE_SPARK_REMOTE {remote} is not sc://{name}:{port}")
    # Unauthenticated: whoever reaches it runs code as the image's user with the lake's write access.
    for published in service.get("ports") or []:
        problems.append(f"{name}: publishes {published}: Spark Connect has no authentication")
    if not service.get("profiles"):
        problems.append(f"{name}: started by every `up`; it must be opt-in (a profile)")
    return problems


def jvm_share(heap: int, cores: int) -> int:
    """What one Spark JVM with `cores` Python cores takes from its container (compose.yaml's header)."""
    return heap + JVM_OVERHEAD + cores * PYTHON_PER_CORE


def cores_problems(c: dict) -> list[str]:
    """Every application caps its cores and memory, and all of them at once fit the workers: the scheduler runs
    PARALLELISM applications, the ever-running Connect one beside them; a task that finds no free core waits.
    Then every container's memory limit holds what runs in it."""
    workers = {n: s for n, s in c["services"].items() if "org.apache.spark.deploy.worker.Worker" in words(s)}
    offered = sum(int(option(words(s), "--cores", "0")) for s in workers.values())
    offered_memory = sum(size(option(words(s), "--memory", "0")) for s in workers.values())
    drivers = spark_drivers(c)
    problems = [f"{n}: no {key}" for n, conf in drivers.items() for key in SIZED if key not in conf]
    if problems:
        return problems
    instances = {n: int(env(c["services"][n]).get("AIRFLOW__CORE__PARALLELISM", 1)) for n in drivers}
    wanted = sum(int(conf["spark.cores.max"]) * instances[n] for n, conf in drivers.items())
    wanted_memory = sum(size(conf["spark.executor.memory"]) * instances[n] for n, conf in drivers.items())
    if wanted != offered:
        problems.append(f"applications take {wanted} cores, workers offer {offered}")
    if wanted_memory > offered_memory:
        problems.append(
            f"applications take {wanted_memory >> 20}m of executor memory, workers offer {offered_memory >> 20}m"
        )
    for name, service in workers.items():
        executors = sum(instances.values())
        daemon = size(env(service).get("SPARK_DAEMON_MEMORY", "1g")) + DAEMON_EXTRA
        need = offered_memory + executors * JVM_OVERHEAD + offered * PYTHON_PER_CORE + daemon
        if (mem_limit(service) or 0) < need:
            problems.append(f"{name}: mem_limit {(mem_limit(service) or 0) >> 20}m < {need >> 20}m it may use")
    for name, conf in drivers.items():
        need = instances[name] * jvm_share(size(conf["spark.driver.memory"]), 1)
        need += SCHEDULER_OWN if name in airflow_services(c) else 0
        if (mem_limit(c["services"][name]) or 0) < need:
            problems.append(f"{name}: mem_limit {(mem_limit(c['services'][name]) or 0) >> 20}m < {need >> 20}m")
    return problems


def volume_problems(c: dict, volume: str, target: str, services: dict[str, dict]) -> list[str]:
    problems = [] if volume in (c.get("volumes") or {}) else [f"volume {volume} is not declared"]
    for name, service in services.items():
        if mounts(service).get(target) != volume:
            problems.append(f"{name}: does not mount {volume} at {target}")
    return problems


def dependency_problems(c: dict) -> list[str]:
    """depends_on names existing services and has no cycle (a service cannot wait for itself)."""
    graph = {n: list(s.get("depends_on") or []) for n, s in c["services"].items()}
    problems = [f"{n}: depends on unknown {d}" for n, deps in graph.items() for d in deps if d not in graph]
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        if node in path:
            problems.append(f"dependency cycle {' -> '.join((*path, node))}")
        elif node not in done and node in graph:
            for dep in graph[node]:
                visit(dep, (*path, node))
            done.add(node)

    for node in graph:
        visit(node, ())
    return problems


def env_example_problems(c: dict, example: dict[str, str]) -> list[str]:
    problems = [f"airflow.env.example does not name {k}" for k in REQUIRED_ENV if k not in example]
    api = urlsplit(example.get("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", ""))
    server = c["services"].get(api.hostname or "", {})
    if words(server)[:2] != ["airflow", "api-server"] or str(api.port) != option(words(server), "--port", "8080"):
        problems.append(f"execution API URL {api.geturl()!r} is not the api-server service and port")
    if api.path != "/execution/":
        problems.append(f"execution API URL path is {api.path!r}, not /execution/")
    db = urlsplit(example.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", ""))
    if db.hostname not in c["services"] or db.password != "<POSTGRES_PASSWORD>":
        problems.append("the database URL must name the postgres service and the <POSTGRES_PASSWORD> placeholder")
    return problems


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether the build context leaves `path` out: the last matching pattern wins, `!` re-includes, and a
    pattern matching a directory leaves out everything under it (Docker: .dockerignore file)."""
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern.lstrip("!").strip("/")
        regex = re.escape(body).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
        if any(re.fullmatch(regex.replace(r"\?", "[^/]"), prefix) for prefix in prefixes):
            result = not negate
    return result


def copy_sources() -> list[str]:
    sources = []
    for op, args in dockerfile_instructions():
        argv = shlex.split(args)
        if op in ("COPY", "ADD") and not any(a.startswith("--from") for a in argv):
            sources += [a for a in argv if not a.startswith("--")][:-1]
    return sources


def load_make_env():
    spec = importlib.util.spec_from_file_location("make_env", DOCKER / "make_env.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- the tests ---------------------------------------------------------------------------------------------------


def test_airflow_services_share_one_env_file(compose):
    assert set(airflow_services(compose)) >= {"airflow-api-server", "airflow-scheduler", "airflow-dag-processor"}
    assert shared_secret_problems(compose) == []
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-scheduler"]["env_file"] = ["scheduler.env"]
    assert shared_secret_problems(broken) == [
        "airflow-scheduler: env_file is ('scheduler.env',), not ('airflow.env', ...)"
    ]
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-api-server"]["environment"]["AIRFLOW__API_AUTH__JWT_SECRET"] = "per-container"
    assert len(shared_secret_problems(broken)) == 1
    broken = copy.deepcopy(compose)
    broken["services"]["kafka"]["environment"]["KAFKA_SASL_PASSWORD"] = "inline"
    assert len(shared_secret_problems(broken)) == 1


def test_secrets_reach_only_the_services_that_need_them(compose):
    assert secret_scope_problems(compose) == []
    assert secrets_reaching(compose["services"]["postgres"]) == {"POSTGRES_PASSWORD"}
    assert "REBALANCE_KAFKA_SASL_PASSWORD" in secrets_reaching(compose["services"]["rebalance"])
    assert secrets_reaching(compose["services"]["spark-worker"]) == set()
    broken = copy.deepcopy(compose)
    broken["services"]["postgres"]["env_file"] = ["airflow.env"]  # the Postgres: every Airflow secret
    assert secret_scope_problems(broken) == [
        "postgres: receives ['AIRFLOW__API_AUTH__JWT_SECRET', 'AIRFLOW__API__SECRET_KEY', "
        "'AIRFLOW__CORE__FERNET_KEY', 'AIRFLOW__DATABASE__SQL_ALCHEMY_CONN'], which it does not need"
    ]
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-dag-processor"]["env_file"] = ["airflow.env", "kafka.env"]
    assert secret_scope_problems(broken) == [
        "airflow-dag-processor: receives ['REBALANCE_KAFKA_SASL_PASSWORD', 'REBALANCE_KAFKA_SSL_KEY_PASSWORD'], "
        "which it does not need"
    ]
    broken = copy.deepcopy(compose)
    broken["services"]["spark-master"]["environment"]["AWS_SECRET_ACCESS_KEY"] = "inline"
    assert secret_scope_problems(broken) == ["spark-master: receives ['AWS_SECRET_ACCESS_KEY'], which it does not need"]
    broken = copy.deepcopy(compose)
    broken["services"]["rebalance"]["env_file"] = ["rebalance.env"]
    assert secret_scope_problems(broken) == [
        "rebalance: env_file rebalance.env has no rebalance.env.example that make_env.py writes"
    ]


def test_the_cli_and_the_task_runner_get_the_kafka_settings(compose):
    # The Kafka credentials reach the two processes that read Kafka: the nightly tasks and `rebalance run`.
    for name in ("airflow-scheduler", "rebalance"):
        assert "kafka.env" in env_files(compose["services"][name]), name
    assert "REBALANCE_KAFKA_BOOTSTRAP_SERVERS" in env_example("kafka.env")
    assert {"REBALANCE_KAFKA_SASL_USERNAME", "REBALANCE_KAFKA_SASL_PASSWORD"} <= env_file_names("kafka.env")


def test_published_ports_bind_loopback_only(compose):
    assert any(s.get("ports") for s in compose["services"].values())
    assert port_problems(compose) == []
    for service, bad in (
        ("spark-master", "8081:8080"),
        ("spark-master", "0.0.0.0:8081:8080"),
        ("kafka", 9094),
        ("kafka", {"target": 9094, "published": 9094}),
        ("spark-connect", "15002:15002"),
    ):
        broken = copy.deepcopy(compose)
        broken["services"][service]["ports"] = [bad]
        assert len(port_problems(broken)) == 1, bad
    # The api-server asks for a password: it may be published on every address (here it is not).
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-api-server"]["ports"] = ["8080:8080"]
    assert port_problems(broken) == []


def test_long_running_services_are_health_checked_restarted_and_limited(compose):
    assert set(long_running(compose)) == {
        "postgres",
        "airflow-api-server",
        "airflow-scheduler",
        "airflow-dag-processor",
        "kafka",
        "spark-master",
        "spark-worker",
        "spark-connect",
    }
    assert health_problems(compose) == []
    for service in ("kafka", "spark-master", "spark-worker", "spark-connect", "airflow-scheduler"):
        broken = copy.deepcopy(compose)
        del broken["services"][service]["healthcheck"]
        assert health_problems(broken) == [f"{service}: no health check"], service
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-dag-processor"]["healthcheck"] = {"test": ["NONE"]}
    assert health_problems(broken) == ["airflow-dag-processor: no health check"]
    broken = copy.deepcopy(compose)
    del broken["services"]["kafka"]["restart"]
    assert health_problems(broken) == ["kafka: restart is None, not unless-stopped"]
    broken = copy.deepcopy(compose)
    broken["services"]["spark-worker"]["depends_on"] = ["spark-master"]
    assert health_problems(broken) == ["spark-worker: waits for spark-master with service_started, not service_healthy"]
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-scheduler"]["depends_on"]["kafka"] = {"condition": "service_started"}
    assert health_problems(broken) == ["airflow-scheduler: waits for kafka with service_started, not service_healthy"]
    broken = copy.deepcopy(compose)
    del broken["services"]["postgres"]["mem_limit"]
    assert health_problems(broken) == ["postgres: no memory limit"]
    broken["services"]["postgres"]["deploy"] = {"resources": {"limits": {"memory": "512m"}}}
    assert health_problems(broken) == []
    # One-shot commands neither restart nor report health.
    assert {"airflow-init", "rebalance"} == set(compose["services"]) - set(long_running(compose))


def test_one_image_built_once(compose):
    assert image_problems(compose) == []
    broken = copy.deepcopy(compose)
    broken["services"]["spark-worker"]["build"] = {"context": "..", "dockerfile": "docker/Dockerfile"}
    assert image_problems(broken)
    broken = copy.deepcopy(compose)
    broken["services"]["spark-master"]["image"] = "rebalance-planner:latest"
    assert image_problems(broken)
    broken = copy.deepcopy(compose)
    del broken["services"]["airflow-dag-processor"]["pull_policy"]
    assert image_problems(broken)


def test_spark_drivers_advertise_their_own_name(compose):
    assert set(spark_drivers(compose)) == {"airflow-scheduler", "spark-connect"}
    assert driver_problems(compose) == []
    for conf in ("spark.driver.host=127.0.0.1,spark.driver.bindAddress=0.0.0.0", "spark.driver.host=airflow-scheduler"):
        broken = copy.deepcopy(compose)
        broken["services"]["airflow-scheduler"]["environment"]["REBALANCE_SPARK_CONF"] = conf
        assert len(driver_problems(broken)) == 1, conf
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-scheduler"]["environment"]["REBALANCE_SPARK_MASTER"] = "local[*]"
    assert driver_problems(broken) == [
        "airflow-scheduler: runs the tasks but uses neither the Spark cluster nor Spark Connect"
    ]
    broken = copy.deepcopy(compose)
    broken["services"]["spark-connect"]["command"] = broken["services"]["spark-connect"]["command"].replace(
        "spark.driver.host=spark-connect", "spark.driver.host=localhost"
    )
    assert len(driver_problems(broken)) == 1
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-scheduler"]["environment"]["REBALANCE_SPARK_MASTER"] = "spark://spark-master:7078"
    assert len(driver_problems(broken)) == 1


def test_spark_connect_is_opt_in_unpublished_and_named_right(compose):
    assert connect_problems(compose) == []
    assert compose["services"]["spark-connect"]["profiles"] == ["connect"]
    for wrong in ("sc://spark-connect:15003", "sc://localhost:15002"):
        broken = copy.deepcopy(compose)
        broken["services"]["rebalance"]["environment"]["REBALANCE_SPARK_REMOTE"] = wrong
        assert len(connect_problems(broken)) == 1, wrong
    broken = copy.deepcopy(compose)
    broken["services"]["rebalance"]["environment"]["REBALANCE_SPARK_REMOTE"] = "sc://spark-connect:15002"
    assert connect_problems(broken) == []
    broken = copy.deepcopy(compose)
    broken["services"]["spark-connect"]["ports"] = ["127.0.0.1:15002:15002"]
    assert connect_problems(broken) == [
        "spark-connect: publishes 127.0.0.1:15002:15002: Spark Connect has no authentication"
    ]
    broken = copy.deepcopy(compose)
    del broken["services"]["spark-connect"]["profiles"]
    assert connect_problems(broken) == ["spark-connect: started by every `up`; it must be opt-in (a profile)"]
    broken = copy.deepcopy(compose)
    del broken["services"]["spark-connect"]
    assert connect_problems(broken) == ["0 Spark Connect services"]
    # The compose lake is a directory: the project's Connect clients refuse it on a server of another host.
    assert "REBALANCE_SPARK_REMOTE" not in env(compose["services"]["rebalance"])


def test_spark_applications_fit_the_workers(compose):
    assert cores_problems(compose) == []
    scheduler = compose["services"]["airflow-scheduler"]
    parallelism = int(env(scheduler)["AIRFLOW__CORE__PARALLELISM"])
    assert parallelism == 4 and spark_conf_setting(env(scheduler)["REBALANCE_SPARK_CONF"])["spark.cores.max"] == "1"

    def worker(old: str, new: str) -> dict:
        broken = copy.deepcopy(compose)
        command = broken["services"]["spark-worker"]["command"]
        assert old in command
        broken["services"]["spark-worker"]["command"] = command.replace(old, new)
        return broken

    # The worker: 4 cores for 4 task applications of 1 core and Connect's 2.
    assert cores_problems(worker("--cores 6", "--cores 4")) == ["applications take 6 cores, workers offer 4"]
    assert cores_problems(worker("--memory 5g", "--memory 4g")) == [
        "applications take 5120m of executor memory, workers offer 4096m"
    ]
    assert cores_problems(worker("--memory 5g", "--memory 8g")) == [
        "spark-worker: mem_limit 11264m < 13952m it may use"
    ]
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-scheduler"]["environment"]["AIRFLOW__CORE__PARALLELISM"] = "8"
    assert cores_problems(broken) == [
        "applications take 10 cores, workers offer 6",
        "applications take 9216m of executor memory, workers offer 5120m",
        "spark-worker: mem_limit 11264m < 12416m it may use",
        "airflow-scheduler: mem_limit 9216m < 16384m",
    ]
    broken = copy.deepcopy(compose)
    broken["services"]["spark-connect"]["mem_limit"] = "1g"
    assert cores_problems(broken) == ["spark-connect: mem_limit 1024m < 1920m"]
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-scheduler"]["environment"]["REBALANCE_SPARK_CONF"] = (
        "spark.driver.host=airflow-scheduler,spark.driver.bindAddress=0.0.0.0,spark.executor.memory=1g,"
        "spark.driver.memory=1g"
    )
    assert cores_problems(broken) == ["airflow-scheduler: no spark.cores.max"]


def test_the_scheduler_naps_as_long_as_the_local_deployment_does(compose):
    """The compose scheduler's idle sleep is the one measured for the local deployment and the tests' Airflow."""
    from jobs.airflow.environment import SCHEDULER_IDLE_SLEEP

    scheduler = env(compose["services"]["airflow-scheduler"])
    assert scheduler["AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME"] == SCHEDULER_IDLE_SLEEP


def test_airflow_services_share_the_logs_volume(compose):
    logs = f"{image_env()['AIRFLOW_HOME']}/logs"
    assert volume_problems(compose, "airflow-logs", logs, airflow_services(compose)) == []
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-api-server"]["volumes"] = ["lake:/lake"]
    assert volume_problems(broken, "airflow-logs", logs, airflow_services(broken)) == [
        f"airflow-api-server: does not mount airflow-logs at {logs}"
    ]


def test_spark_and_airflow_services_share_the_lake_at_one_path(compose):
    lake = image_env()["REBALANCE_LAKE"]
    users = {**airflow_services(compose), **spark_services(compose), "rebalance": compose["services"]["rebalance"]}
    assert {"spark-master", "spark-worker", "spark-connect", "airflow-scheduler"} <= set(users)
    assert volume_problems(compose, "lake", lake, users) == []
    broken = copy.deepcopy(compose)
    broken["services"]["spark-worker"]["volumes"] = ["lake:/data/lake"]
    users = {**airflow_services(broken), **spark_services(broken)}
    assert volume_problems(broken, "lake", lake, users) == [f"spark-worker: does not mount lake at {lake}"]


def test_dependencies_exist_and_do_not_cycle(compose):
    assert dependency_problems(compose) == []
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-init"]["depends_on"]["airflow-init"] = {"condition": "service_completed_successfully"}
    assert dependency_problems(broken) == ["dependency cycle airflow-init -> airflow-init"]
    broken = copy.deepcopy(compose)
    broken["services"]["spark-worker"]["depends_on"] = ["spark-leader"]
    assert dependency_problems(broken) == ["spark-worker: depends on unknown spark-leader"]


def test_env_example_names_every_variable_compose_expects(compose):
    example = env_example()
    assert env_example_problems(compose, example) == []
    assert env_example("postgres.env") == {"POSTGRES_PASSWORD": "<generate>"}
    assert {k for k in SHARED_SECRETS if example[k] != "<generate>"} == set(), (
        "the example carries placeholders, never secrets"
    )
    for name in REQUIRED_ENV:
        assert env_example_problems(compose, {k: v for k, v in example.items() if k != name}), name
    wrong_port = {**example, "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": "http://airflow-api-server:9090/execution/"}
    assert len(env_example_problems(compose, wrong_port)) == 1
    # Interpolated from the shell, not from the env file: each needs a default so `up` works with the file alone.
    text = (DOCKER / "compose.yaml").read_text()
    assert [v for v in re.findall(r"\$\{([^}]*)\}", text) if ":-" not in v] == []


def test_make_env_fills_every_placeholder(tmp_path):
    make_env = load_make_env()
    examples = {name: (DOCKER / f"{name}.example").read_text() for name in make_env.FILES}
    first, second = make_env.render_all(examples), make_env.render_all(examples)
    values = {k: v for text in first.values() for k, v in make_env.settings(text)}
    assert "<" not in "".join(values.values())
    assert make_env.settings(first["postgres.env"]) == [("POSTGRES_PASSWORD", values["POSTGRES_PASSWORD"])]
    assert values["POSTGRES_PASSWORD"] not in first["kafka.env"]
    assert len(base64.urlsafe_b64decode(values["AIRFLOW__CORE__FERNET_KEY"])) == 32
    Fernet(values["AIRFLOW__CORE__FERNET_KEY"].encode())
    assert urlsplit(values["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).password == values["POSTGRES_PASSWORD"]
    assert len({values[k] for k in SHARED_SECRETS}) == len(SHARED_SECRETS)
    assert all(values[k] not in "".join(second.values()) for k in (*SHARED_SECRETS, "POSTGRES_PASSWORD"))
    with pytest.raises(SystemExit, match="NOPE"):
        make_env.render("A=<NOPE>\n")
    assert make_env.main(["--output", str(tmp_path)]) == 0
    for name in make_env.FILES:
        assert (tmp_path / name).stat().st_mode & 0o077 == 0, name
    assert make_env.main(["--output", str(tmp_path)]) == 2  # never overwrites secrets already in use
    (tmp_path / "airflow.env").unlink()
    assert make_env.main(["--output", str(tmp_path)]) == 2  # nor some of them
    assert not (tmp_path / "airflow.env").exists()


def test_build_context_and_copy_sources():
    patterns = dockerignore_patterns()
    for path in (".venv", ".venv/lib/python3.11", ".git", ".git/objects", "docker/airflow.env", "lake/snapshots"):
        assert ignored(path, patterns), path
    sources = copy_sources()
    assert {"constraints.txt", "pyproject.toml", "planner", "jobs", "dags"} <= set(sources)
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
        assert not ignored(source, patterns), f"COPY {source}: left out of the build context by .dockerignore"
    assert ignored("jobs/x.egg-info", ["**/*.egg-info"]) and not ignored("jobs/x.py", ["**/*.egg-info"])
    assert not ignored("planner", ["planner", "!planner"])
    for name in load_make_env().FILES:
        assert f"docker/{name}" in (ROOT / ".gitignore").read_text().splitlines(), name
        assert ignored(f"docker/{name}", patterns), name


def test_image_pins_agree_with_constraints():
    def pins(path: Path) -> dict[str, str]:
        lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
        return {n.lower().replace("_", "-"): v for n, v in (line.split("==") for line in lines if line)}

    image, constraints = pins(DOCKER / "requirements.txt"), pins(ROOT / "constraints.txt")
    assert {n: (v, constraints[n]) for n, v in image.items() if n in constraints and constraints[n] != v} == {}


def admin_password_problems(c: dict) -> list[str]:
    """The api-server's generated admin password is kept in a named volume, so a recreated container keeps it."""
    service = c["services"]["airflow-api-server"]
    file = env(service).get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE")
    if not file:
        return [f"the password file is {image_env()['AIRFLOW_HOME']}/simple_auth_manager_passwords.json.generated"]
    directory = str(Path(file).parent)
    volume = mounts(service).get(directory)
    if volume not in (c.get("volumes") or {}):
        return [f"{directory} is not a named volume of airflow-api-server"]
    return []


def test_the_admin_password_survives_a_new_container(compose):
    assert admin_password_problems(compose) == []
    # The image creates the directory for uid 50000: the empty volume takes its ownership.
    assert any(op == "RUN" and "/opt/airflow/auth" in args for op, args in dockerfile_instructions())
    broken = copy.deepcopy(compose)
    del broken["services"]["airflow-api-server"]["environment"]["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
    assert admin_password_problems(broken) == [
        "the password file is /opt/airflow/simple_auth_manager_passwords.json.generated"
    ]
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-api-server"]["volumes"] = ["airflow-logs:/opt/airflow/logs", "lake:/lake"]
    assert admin_password_problems(broken) == ["/opt/airflow/auth is not a named volume of airflow-api-server"]


def first_night_problems(c: dict) -> list[str]:
    """What the first scheduled night needs without a person: DAGs unpaused when parsed, the tasks' Kafka settings
    and the lake, and a Kafka that answers before the scheduler starts."""
    problems = []
    for name, service in airflow_services(c).items():
        if env(service).get("AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION", "True").lower() != "false":
            problems.append(f"{name}: new DAGs are paused (Airflow's default): no night runs until someone unpauses")
    scheduler = c["services"]["airflow-scheduler"]
    if "kafka.env" not in env_files(scheduler):
        problems.append("airflow-scheduler: no kafka.env, the tasks have no REBALANCE_KAFKA_BOOTSTRAP_SERVERS")
    if mounts(scheduler).get(image_env()["REBALANCE_LAKE"]) != "lake":
        problems.append("airflow-scheduler: the lake volume is not mounted at REBALANCE_LAKE")
    return problems


def test_the_first_night_needs_nobody(compose):
    assert first_night_problems(compose) == []
    broken = copy.deepcopy(compose)
    del broken["services"]["airflow-dag-processor"]["environment"]["AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION"]
    assert len(first_night_problems(broken)) == 1
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-scheduler"]["env_file"] = ["airflow.env"]
    assert len(first_night_problems(broken)) == 1
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-scheduler"]["volumes"] = ["airflow-logs:/opt/airflow/logs"]
    assert len(first_night_problems(broken)) == 1
