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
from leasegate.config import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
KUBERNETES_VERSION = "1.37.0"  # the schemas bundled with the pinned kubernetes-validate
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
    assert env_files == {"./leasegate.env"}
    assert "deploy/leasegate.env" in (ROOT / ".gitignore").read_text().splitlines()
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


@pytest.mark.parametrize(("name", "document"), list(_manifests()), ids=lambda v: str(v)[:40])
def test_every_manifest_is_valid_for_the_pinned_kubernetes(
    name: str, document: dict[str, Any]
) -> None:
    kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


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
