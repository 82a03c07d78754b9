"""The deployment files, checked without a container engine: compose.yaml against the Compose
Specification's JSON schema, every Kubernetes manifest against the API schemas of a pinned
Kubernetes version, and the Dockerfile's structure as parsed."""

from __future__ import annotations

import copy
import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from dockerfile_parse import DockerfileParser

from leasegate.accounts import parse_accounts
from leasegate.config import Settings, load_config
from tests.fixtures.deploy_files import check_server, documented_secrets

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
KUBERNETES_VERSION = "1.37.0"  # the newest schemas bundled with the pinned kubernetes-validate
DEPLOYMENT_DOC = (ROOT / "docs" / "deployment.md").read_text()
_OLDEST = re.search(r"Kubernetes (1\.\d+) or later", DEPLOYMENT_DOC)
assert _OLDEST is not None, "docs/deployment.md names the oldest Kubernetes it supports"
OLDEST_KUBERNETES = f"{_OLDEST.group(1)}.0"
SPILL = "LEASEGATE_EVIDENCE_SPILL_PATH"
SECRET_VARIABLES = re.compile(r"LEASEGATE_(DATABASE_URL|REDIS_URL|.*TOKENS?|AUDIT_KEY|CRED_.*)")
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


# --- compose -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = _yaml(DEPLOY / "compose.yaml")
    return document


@pytest.fixture(scope="module")
def compose_validator() -> jsonschema.Draft7Validator:
    schema = json.loads((ROOT / "tests" / "data" / "compose-spec.json").read_text())
    return jsonschema.Draft7Validator(schema)


def test_compose_file_follows_the_compose_specification(
    compose: dict[str, Any], compose_validator: jsonschema.Draft7Validator
) -> None:
    errors = [f"{e.json_path}: {e.message}" for e in compose_validator.iter_errors(compose)]
    assert errors == []
    broken = copy.deepcopy(compose)
    broken["services"]["proxy"]["healthcheck"]["tset"] = ["CMD", "true"]  # a typo
    assert not compose_validator.is_valid(broken)  # the schema is really applied


def test_compose_runs_production_mode(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"postgres", "redis", "migrate", "control-plane", "proxy", "demo-upstream"} <= set(
        services
    )
    assert services["migrate"]["command"] == ["migrate"]
    assert services["proxy"]["deploy"]["replicas"] == 2
    assert services["demo-upstream"]["profiles"] == ["demo"]
    for name in ("control-plane", "proxy"):
        service = services[name]
        assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert "/readyz" in " ".join(service["healthcheck"]["test"])
        assert "--workers" in service["command"]


def test_compose_secrets_come_from_an_uncommitted_env_file(compose: dict[str, Any]) -> None:
    env_files = {
        entry["path"] for s in compose["services"].values() for entry in s.get("env_file", ())
    }
    assert env_files == {"./leasegate.env", "./postgres.env"}
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert {"deploy/leasegate.env", "deploy/postgres.env"} <= set(ignored)
    for service in compose["services"].values():
        for name in service.get("environment", {}):
            assert not SECRET_VARIABLES.fullmatch(name), f"{name} is a literal in compose.yaml"
    known = {f"LEASEGATE_{field.upper()}" for field in Settings.model_fields}
    example = (DEPLOY / "leasegate.env.example").read_text().splitlines()
    names = [line.split("=", 1)[0] for line in example if line and not line.startswith("#")]
    for name in names:
        if name.startswith("LEASEGATE_") and not name.startswith("LEASEGATE_CRED_"):
            assert name in known, f"{name} in leasegate.env.example is not a setting"


def test_compose_accounts_file_is_valid() -> None:
    registry = parse_accounts(_yaml(DEPLOY / "compose" / "accounts.yaml"), set())
    assert all(a.base_url.startswith("http://demo-upstream:") for a in registry.accounts)


def _env_example(name: str) -> dict[str, str]:
    lines = (DEPLOY / name).read_text().splitlines()
    pairs = (line.split("=", 1) for line in lines if line and not line.startswith("#"))
    return {key: value for key, value in pairs}


def test_postgres_receives_only_its_own_variables(compose: dict[str, Any]) -> None:
    (postgres_env,) = compose["services"]["postgres"]["env_file"]
    assert postgres_env["path"] == "./postgres.env"
    assert set(_env_example("postgres.env.example")) == {"POSTGRES_PASSWORD"}
    gateway = _env_example("leasegate.env.example")
    assert not [name for name in gateway if name.startswith("POSTGRES_")]
    password = _env_example("postgres.env.example")["POSTGRES_PASSWORD"]
    assert f":{password}@" in gateway["LEASEGATE_DATABASE_URL"]  # the two files agree


@pytest.mark.parametrize("name", ["control-plane", "proxy"])
def test_compose_servers_pass_their_start_up_checks(compose: dict[str, Any], name: str) -> None:
    """The settings each server gets (the example env file and its `environment:`) pass the
    checks `leasegate` runs before it serves, with the service's own `--workers`."""
    service = compose["services"][name]
    env = {**_env_example("leasegate.env.example"), **service.get("environment", {})}
    del env["LEASEGATE_ACCOUNTS_FILE"]  # a path inside the container
    command = service["command"]
    workers = int(command[command.index("--workers") + 1])
    check_server(command[0], workers, load_config(env).settings)


def test_compose_proxies_spill_evidence_onto_a_volume(compose: dict[str, Any]) -> None:
    proxy = compose["services"]["proxy"]
    path = proxy["environment"][SPILL]
    volumes = {v["target"]: v for v in proxy["volumes"]}
    assert volumes[path]["type"] == "volume"
    assert volumes[path]["source"] in compose["volumes"]
    assert "/etc/leasegate/accounts.yaml" in volumes  # the anchor's mount is kept
    dockerfile = DockerfileParser(path=str(DEPLOY / "Dockerfile"))
    final = " ".join(step["value"] for step in _final_stage(dockerfile))
    assert f"install -d -o 10001 -g 10001 -m 0750 {path}" in final  # the volume's owner


# --- kubernetes --------------------------------------------------------------------------


def _manifests() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(KUBERNETES.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            for document in yaml.safe_load_all(path.read_text()):
                yield path.name, document


def _by_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in _manifests() if doc["kind"] == kind]


def _deployment(name: str) -> dict[str, Any]:
    (found,) = [d for d in _by_kind("Deployment") if d["metadata"]["name"] == name]
    return found


def test_kustomization_lists_every_manifest() -> None:
    kustomization = _yaml(KUBERNETES / "kustomization.yaml")
    files = {p.name for p in KUBERNETES.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files
    assert kustomization["images"][0]["newTag"] == VERSION


@pytest.mark.parametrize("version", [OLDEST_KUBERNETES, KUBERNETES_VERSION])
@pytest.mark.parametrize(("name", "document"), list(_manifests()), ids=lambda v: str(v)[:40])
def test_every_manifest_is_valid_for_the_kubernetes_versions_the_docs_name(
    name: str, document: dict[str, Any], version: str
) -> None:
    kubernetes_validate.validate(document, version, strict=True)


def test_pre_stop_sleep_is_on_by_default_on_the_oldest_kubernetes_named() -> None:
    """The `sleep` action is beta and on by default from 1.30 (alpha, off, in 1.29: the API
    server drops the field and the pod gets no pause before SIGTERM)."""
    assert tuple(int(p) for p in OLDEST_KUBERNETES.split(".")[:2]) >= (1, 30)
    for name in ("leasegate-control-plane", "leasegate-proxy"):
        (container,) = _deployment(name)["spec"]["template"]["spec"]["containers"]
        assert container["lifecycle"]["preStop"]["sleep"]["seconds"] > 0


def test_the_image_is_a_placeholder_set_in_one_kustomize_entry() -> None:
    kustomization = _yaml(KUBERNETES / "kustomization.yaml")
    (entry,) = kustomization["images"]
    images = {c["image"] for _, doc in _manifests() for c in _containers(doc)}
    assert images == {entry["name"]}  # every container's image is rewritten by the entry
    assert entry["newName"].startswith("registry.example.com/")
    assert "kustomize edit set image leasegate=" in DEPLOYMENT_DOC


def _secret_env(container: dict[str, Any]) -> dict[str, str]:
    """Each variable taken from the Secret `leasegate`, and its key."""
    return {
        e["name"]: e["valueFrom"]["secretKeyRef"]["key"]
        for e in container.get("env", ())
        if e.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == "leasegate"
    }


def test_servers_take_the_audit_key_and_the_console_secret_from_the_secret() -> None:
    """Without the audit key a proxy reads a signed chain as corrupt and enforces no tenant
    budget; without one console secret the control-plane replicas refuse each other's
    sessions. Every key they read is one the documented `kubectl create secret` creates."""
    documented = set(documented_secrets()["leasegate"])
    for _, document in _manifests():
        for container in _containers(document):
            assert set(_secret_env(container).values()) <= documented
    (proxy,) = _deployment("leasegate-proxy")["spec"]["template"]["spec"]["containers"]
    assert _secret_env(proxy)["LEASEGATE_AUDIT_KEY"] == "audit-key"
    control = _deployment("leasegate-control-plane")
    assert control["spec"]["replicas"] > 1
    (container,) = control["spec"]["template"]["spec"]["containers"]
    assert _secret_env(container)["LEASEGATE_AUDIT_KEY"] == "audit-key"
    assert _secret_env(container)["LEASEGATE_CONSOLE_SECRET"] == "console-secret"


def test_kubernetes_proxies_spill_evidence_onto_a_volume() -> None:
    pod = _deployment("leasegate-proxy")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volume = mounts[env[SPILL]]
    assert "emptyDir" in {v["name"]: v for v in pod["volumes"]}[volume]
    assert pod["securityContext"]["fsGroup"] == 10001


def test_the_migrate_job_re_apply_is_documented() -> None:
    (job,) = _by_kind("Job")
    assert job["metadata"]["name"] == "leasegate-migrate"
    again = "kubectl delete job leasegate-migrate --ignore-not-found && kubectl apply -k"
    assert again in (KUBERNETES / "migrate-job.yaml").read_text()
    assert again in DEPLOYMENT_DOC


@pytest.mark.parametrize("unit", ["leasegate-control-plane.service", "leasegate-proxy@.service"])
def test_systemd_servers_pass_their_start_up_checks(unit: str) -> None:
    """production.env.example (the units' EnvironmentFile) and each unit's own --workers."""
    text = (DEPLOY / "systemd" / unit).read_text()
    (command,) = re.findall(r"^ExecStart=\S+/leasegate (.+)$", text, re.M)
    args = command.replace("%i", "8081").split()
    env = _env_example("production.env.example")
    del env["LEASEGATE_ACCOUNTS_FILE"]  # a path on the host
    check_server(args[0], int(args[args.index("--workers") + 1]), load_config(env).settings)


def test_systemd_proxies_spill_evidence_into_their_state_directory() -> None:
    unit = (DEPLOY / "systemd" / "leasegate-proxy@.service").read_text()
    (path,) = re.findall(rf"^Environment={SPILL}=(\S+)$", unit, re.M)
    (state,) = re.findall(r"^StateDirectory=(\S+)$", unit, re.M)
    assert path == f"/var/lib/{state}"
    assert re.search(r"^User=\S+$", unit, re.M)  # one dynamic user for every replica


def test_kubernetes_has_every_part() -> None:
    kinds = sorted(doc["kind"] for _, doc in _manifests())
    assert kinds == sorted(
        [
            "ConfigMap",
            "Deployment",
            "Deployment",
            "HorizontalPodAutoscaler",
            "Job",
            "PodDisruptionBudget",
            "Service",
            "Service",
        ]
    )
    assert _deployment("leasegate-control-plane")["spec"]["replicas"] == 2
    (hpa,) = _by_kind("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "leasegate-proxy"
    (pdb,) = _by_kind("PodDisruptionBudget")
    proxy_labels = _deployment("leasegate-proxy")["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= proxy_labels.items()
    (config_map,) = _by_kind("ConfigMap")
    parse_accounts(yaml.safe_load(config_map["data"]["accounts.yaml"]), set())


@pytest.mark.parametrize("name", ["leasegate-control-plane", "leasegate-proxy"])
def test_servers_probe_drain_scrape_and_take_secrets_by_reference(name: str) -> None:
    pod = _deployment(name)["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    assert {"cpu", "memory"} <= set(container["resources"]["limits"])
    assert "--workers" in container["args"]
    env = {e["name"]: e for e in container["env"]}
    drain = float(env["LEASEGATE_SHUTDOWN_DRAIN_S"]["value"])
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["spec"]["terminationGracePeriodSeconds"] > drain + pre_stop
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == container["ports"][0]["containerPort"]
    assert annotations["prometheus.io/path"] == "/metrics"
    assert [source["secretRef"]["name"] for source in container["envFrom"]] == [
        "leasegate-credentials"
    ]


def test_no_secret_is_a_literal_in_any_manifest() -> None:
    for name, document in _manifests():
        for container in _containers(document):
            for entry in container.get("env", ()):
                if SECRET_VARIABLES.fullmatch(entry["name"]):
                    assert "value" not in entry, f"{name}: {entry['name']} is a literal"
                    assert "secretKeyRef" in entry["valueFrom"]
        assert document["kind"] != "Secret", f"{name}: Secrets are created by the operator"


def _containers(document: dict[str, Any]) -> list[dict[str, Any]]:
    spec = document.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    containers: list[dict[str, Any]] = pod.get("containers", [])
    return containers


# --- Dockerfile --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dockerfile() -> DockerfileParser:
    return DockerfileParser(path=str(DEPLOY / "Dockerfile"))


def _final_stage(parser: DockerfileParser) -> list[dict[str, Any]]:
    structure: list[dict[str, Any]] = parser.structure
    last_from = max(i for i, s in enumerate(structure) if s["instruction"] == "FROM")
    return structure[last_from:]


def test_dockerfile_is_multi_stage_on_a_slim_python(dockerfile: DockerfileParser) -> None:
    assert dockerfile.is_multistage
    for image in dockerfile.parent_images:
        assert re.fullmatch(r"python:3\.\d+(\.\d+)?-slim(-\w+)?", image), image


def test_dockerfile_runs_leasegate_as_a_non_root_user(dockerfile: DockerfileParser) -> None:
    final = _final_stage(dockerfile)
    users = [s["value"] for s in final if s["instruction"] == "USER"]
    assert users, "the final stage sets no USER"
    assert users[-1].split(":")[0] not in {"root", "0"}
    (entrypoint,) = [s["value"] for s in final if s["instruction"] == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["leasegate"]


def test_dockerfile_final_stage_is_lean(dockerfile: DockerfileParser) -> None:
    final = _final_stage(dockerfile)
    for step in dockerfile.structure:
        if step["instruction"] == "ADD":
            assert not re.search(r"https?://", step["value"]), "ADD of a URL"
    runs = " ".join(s["value"] for s in final if s["instruction"] == "RUN")
    assert not re.search(r"\b(gcc|build-essential|apt-get install)\b", runs)
    assert "pip install --no-cache-dir" in runs
    copies = [s["value"] for s in final if s["instruction"] == "COPY"]
    assert copies == [], "the final stage installs from a bind mount; it copies nothing"
    assert dockerfile.labels["org.opencontainers.image.version"] == VERSION


def test_dockerignore_keeps_the_context_small() -> None:
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert {".git", ".venv", "tests", "*.db"} <= set(ignored)
