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
REQUIRED_ENV = (
    *SHARED_SECRETS,
    "AIRFLOW__CORE__EXECUTION_API_SERVER_URL",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
    "POSTGRES_PASSWORD",
)
SECRET_NAME = re.compile(r"SECRET|PASSWORD|FERNET|JWT|TOKEN|_KEY$")
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


def env_example() -> dict[str, str]:
    lines = (DOCKER / "airflow.env.example").read_text().splitlines()
    pairs = [line.split("=", 1) for line in lines if "=" in line and not line.startswith("#")]
    assert len({k for k, _ in pairs}) == len(pairs), "a variable set twice in airflow.env.example"
    return dict(pairs)


# ---- the rules ---------------------------------------------------------------------------------------------------


def shared_secret_problems(c: dict) -> list[str]:
    """Every Airflow service (and Postgres) reads the same single env file; no service sets a secret itself."""
    problems = []
    airflow = airflow_services(c)
    if not airflow:
        return ["no Airflow service"]
    for name, service in {**airflow, "postgres": c["services"]["postgres"]}.items():
        if env_files(service) != (ENV_FILE,):
            problems.append(f"{name}: env_file is {env_files(service)}, not ({ENV_FILE!r},)")
    for name, service in c["services"].items():
        for key in env(service):
            if SECRET_NAME.search(key) or key in REQUIRED_ENV:
                problems.append(f"{name}: sets {key} itself instead of reading it from {ENV_FILE}")
    return problems


def published_host_ip(port: str | int | dict) -> str | None:
    """The host address of a `ports` entry (short `ip:host:container` or long syntax); None means every address."""
    if isinstance(port, dict):
        return port.get("host_ip")
    return str(port).rsplit(":", 2)[0] if str(port).count(":") >= 2 else None


def port_problems(c: dict) -> list[str]:
    problems = []
    for name, service in c["services"].items():
        for port in service.get("ports") or []:
            if published_host_ip(port) != "127.0.0.1":
                problems.append(f"{name}: port {port} is not bound to 127.0.0.1")
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
    if not remotes:
        problems.append("no service sets REBALANCE_SPARK_REMOTE")
    for client, remote in remotes.items():
        url = urlsplit(remote)
        if url.scheme != "sc" or url.hostname not in names_of(name, service) or url.port != port:
            problems.append(f"{client}: REBALANCE_SPARK_REMOTE {remote} is not sc://{name}:{port}")
    for published in service.get("ports") or []:
        if int(str(published).rsplit(":", 1)[-1]) != port:
            problems.append(f"{name}: publishes {published}, the server listens on {port}")
    return problems


def cores_problems(c: dict) -> list[str]:
    """Every application caps its cores and together they fit the workers: the ever-running Connect application
    would otherwise take every core and leave DAG tasks waiting."""
    workers = [s for s in c["services"].values() if "org.apache.spark.deploy.worker.Worker" in words(s)]
    offered = sum(int(option(words(s), "--cores", "0")) for s in workers)
    caps = {n: conf.get("spark.cores.max") for n, conf in spark_drivers(c).items()}
    problems = [f"{n}: no spark.cores.max" for n, cap in caps.items() if cap is None]
    wanted = sum(int(cap) for cap in caps.values() if cap is not None)
    if wanted > offered:
        problems.append(f"applications take {wanted} cores, workers offer {offered}")
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
    assert shared_secret_problems(broken) == ["airflow-scheduler: env_file is ('scheduler.env',), not ('airflow.env',)"]
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-api-server"]["environment"]["AIRFLOW__API_AUTH__JWT_SECRET"] = "per-container"
    assert len(shared_secret_problems(broken)) == 1
    broken = copy.deepcopy(compose)
    broken["services"]["kafka"]["environment"]["KAFKA_SASL_PASSWORD"] = "inline"
    assert len(shared_secret_problems(broken)) == 1


def test_published_ports_bind_loopback_only(compose):
    assert any(s.get("ports") for s in compose["services"].values())
    assert port_problems(compose) == []
    for bad in ("8080:8080", "0.0.0.0:8080:8080", 8080, {"target": 8080, "published": 8080}):
        broken = copy.deepcopy(compose)
        broken["services"]["airflow-api-server"]["ports"] = [bad]
        assert len(port_problems(broken)) == 1, bad


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


def test_spark_connect_serves_the_remote_url(compose):
    assert connect_problems(compose) == []
    remote = compose["services"]["rebalance"]["environment"]["REBALANCE_SPARK_REMOTE"]
    for wrong in ("sc://spark-connect:15003", "sc://localhost:15002"):
        broken = copy.deepcopy(compose)
        broken["services"]["rebalance"]["environment"]["REBALANCE_SPARK_REMOTE"] = wrong
        assert len(connect_problems(broken)) == 1, wrong
    broken = copy.deepcopy(compose)
    broken["services"]["spark-connect"]["ports"] = ["127.0.0.1:15002:15003"]
    assert len(connect_problems(broken)) == 1
    broken = copy.deepcopy(compose)
    del broken["services"]["spark-connect"]
    assert connect_problems(broken) == ["0 Spark Connect services"]
    assert remote == "sc://spark-connect:15002"


def test_spark_applications_fit_the_workers(compose):
    assert cores_problems(compose) == []
    broken = copy.deepcopy(compose)
    broken["services"]["spark-worker"]["command"] = broken["services"]["spark-worker"]["command"].replace(
        "--cores 4", "--cores 2"
    )
    assert cores_problems(broken) == ["applications take 4 cores, workers offer 2"]
    broken = copy.deepcopy(compose)
    broken["services"]["airflow-scheduler"]["environment"]["REBALANCE_SPARK_CONF"] = (
        "spark.driver.host=airflow-scheduler,spark.driver.bindAddress=0.0.0.0"
    )
    assert cores_problems(broken) == ["airflow-scheduler: no spark.cores.max"]


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
    text = (DOCKER / "airflow.env.example").read_text()
    first, second = make_env.render(text), make_env.render(text)
    values = dict(line.split("=", 1) for line in first.splitlines() if "=" in line and not line.startswith("#"))
    assert "<" not in "".join(values.values())
    assert len(base64.urlsafe_b64decode(values["AIRFLOW__CORE__FERNET_KEY"])) == 32
    Fernet(values["AIRFLOW__CORE__FERNET_KEY"].encode())
    assert urlsplit(values["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).password == values["POSTGRES_PASSWORD"]
    assert len({values[k] for k in SHARED_SECRETS}) == len(SHARED_SECRETS)
    assert all(values[k] not in second for k in (*SHARED_SECRETS, "POSTGRES_PASSWORD"))
    with pytest.raises(SystemExit, match="NOPE"):
        make_env.render("A=<NOPE>\n")
    out = tmp_path / "airflow.env"
    assert make_env.main(["--output", str(out)]) == 0
    assert out.stat().st_mode & 0o077 == 0
    assert make_env.main(["--output", str(out)]) == 2  # never overwrites secrets already in use


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
    assert "docker/airflow.env" in (ROOT / ".gitignore").read_text().splitlines()


def test_image_pins_agree_with_constraints():
    def pins(path: Path) -> dict[str, str]:
        lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
        return {n.lower().replace("_", "-"): v for n, v in (line.split("==") for line in lines if line)}

    image, constraints = pins(DOCKER / "requirements.txt"), pins(ROOT / "constraints.txt")
    assert {n: (v, constraints[n]) for n, v in image.items() if n in constraints and constraints[n] != v} == {}
