# Rebalance Planner: `make demo` and `make test` are all a fresh clone needs.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
APT_PACKAGES := openjdk-17-jdk-headless maven chromium chromium-driver

.PHONY: install system demo test test-fast test-jvm lint typecheck bench spark-connect clean

JVM_STAMP := .cache/.resolved
JVM_POMS := jvm/pom.xml jvm/kafka-runtime/pom.xml jvm/delta-runtime/pom.xml jvm/s3-runtime/pom.xml

# The Java plan appliers, built from source: the consumer's jar (PlannedAssignor) and the broker's (PlannedGroupAssignor),
# and the demo's Java consumer application (PlanConsumer, which the demo and the live tests run).
APPLY_JVM := jvm/planned-assignor
APPLY_JARS := $(APPLY_JVM)/target/planned-assignor-1.0.0.jar $(APPLY_JVM)/target/planned-assignor-1.0.0-broker.jar \
	$(APPLY_JVM)/target/planned-assignor-1.0.0-demo.jar
APPLY_SOURCES := jvm/pom.xml $(APPLY_JVM)/pom.xml $(shell find $(APPLY_JVM)/src/main -type f 2>/dev/null)

# Last, the driver JVM's class archive (jobs/io/spark_cds.py): a training run (jobs/spark_archive.py) of about a
# minute, once per Java and set of jars (it returns at once when the archive is there), that halves Spark start-up.
install: system $(STAMP) $(JVM_STAMP) $(APPLY_JARS)
	@$(BIN)/python -m jobs.spark_archive >/dev/null 2>.cache/spark-archive.log \
	  || { tail -n 20 .cache/spark-archive.log >&2; echo "the class archive's training run failed: .cache/spark-archive.log" >&2; exit 1; }

# Re-install only when the pins or the project's metadata change.
$(STAMP): constraints.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt setuptools wheel
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-build-isolation -c constraints.txt -e '.[demo,dev]'
	@touch $(STAMP)

# The JVM runtimes (jvm/): Apache Kafka for the demo, the tests and the benches, Delta Lake's Spark connector and S3A.
# Maven copies them from Maven Central into the git-ignored .cache/<module>/lib, once (again when a pom changes).
$(JVM_STAMP): $(JVM_POMS)
	@command -v mvn >/dev/null 2>&1 || { echo "mvn is missing: install Maven 3 (apt-get install maven) to resolve Apache Kafka and Delta Lake" >&2; exit 1; }
	@rm -rf .cache/kafka .cache/delta
	@mvn -q -B -Dstyle.color=never -f jvm/pom.xml dependency:copy-dependencies >/dev/null \
	  || { echo "Maven could not resolve Apache Kafka and Delta Lake from Maven Central (jvm/pom.xml): check the network or ~/.m2/settings.xml" >&2; exit 1; }
	@touch $@

# The jars come from one `mvn package` (a grouped target), again only when a source or a pom changes; the JUnit tests
# run in `make test` (test-jvm), so an install is not slowed by them.
$(APPLY_JARS) &: $(APPLY_SOURCES)
	@command -v mvn >/dev/null 2>&1 || { echo "mvn is missing: install Maven 3 (apt-get install maven) to build jvm/planned-assignor" >&2; exit 1; }
	@mvn -q -B -Dstyle.color=never -f $(APPLY_JVM)/pom.xml package -DskipTests >/dev/null \
	  || { echo "Maven could not build the plan appliers (jvm/planned-assignor): run it without -q to see why" >&2; exit 1; }
	@touch $(APPLY_JARS)

# Spark and Kafka need a JVM, Kafka's resolution Maven, the report tests a real browser: when java, mvn or chromium
# is missing and we are root, install Debian's headless Java 17, Maven and Chromium (with its driver) with apt.
system:
	@if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES) >/dev/null; \
	  elif ! command -v java >/dev/null 2>&1; then \
	    echo "java is missing: install a Java 17 runtime (openjdk-17-jre-headless)" >&2; exit 1; \
	  elif ! command -v mvn >/dev/null 2>&1; then \
	    echo "mvn is missing: install Maven 3 (maven) to resolve Apache Kafka" >&2; exit 1; \
	  else echo "chromium is missing: the browser test of the report will be skipped" >&2; fi; fi

demo: install
	$(BIN)/rebalance demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

# The unit tier alone (pure domain and contracts, doctests): the inner loop.
test-fast: lint
	$(BIN)/python -m pytest tests/unit planner schemas -m "unit and not slow" -q

# The Java appliers' JUnit tests (every shared fixture of schemas/fixtures/apply on both jars), packaging the jars anew.
test-jvm: install
	mvn -q -B -Dstyle.color=never -f $(APPLY_JVM)/pom.xml package

# Everything CI must prove: lint, format, types, the Java appliers' tests, the unit and integration tiers (demo,
# cluster, Connect, scheduler). The suite waits on brokers, schedulers and JVMs, so it runs as TEST_WORKERS pytest
# processes (pytest-xdist), each test file whole in one of them (its module fixtures start once). On two cores, two
# left them idle a tenth of the run (vmstat), three under 2%: 23.6-25.7 min with two, 16.9-21.4 min with three
# (2026-11-28, the same code's CPU varying by a fifth run to run).
TEST_WORKERS ?= 3
test: lint typecheck test-jvm
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

bench: install
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# A local Spark Connect server on 127.0.0.1:15002 in the foreground (Ctrl-C stops it and its JVM).
spark-connect: install
	$(BIN)/python -m jobs.io.spark_servers connect --port 15002

clean:
	rm -rf $(VENV) .cache .airflow lake .pytest_cache tests/artifacts $(APPLY_JVM)/target
