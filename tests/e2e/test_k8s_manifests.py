"""The Kubernetes manifests (deploy/k8s): the base, the example overlay and the overlay with
the KEDA component render with `kubectl kustomize`; every object validates against the
Kubernetes schemas (kubernetes-validate's bundled ones, offline); every setting each process
reads reaches its container, every secret comes from the Secret and only to the processes
that need it; and the pods, probes, grace periods, shards and network policies say what
docs/operations.md says."""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from pydantic import SecretStr
from pydantic_settings import BaseSettings

from app.config import Settings
from app.jev.settings import JevSettings
from app.kit.arqworker import JOBS_DUE, RELEASE_WAIT_S
from app.relay.service import CLOSE_TIMEOUT_S
from app.relay.settings import RelaySettings
from app.relay.shards import shard_of_pod

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl (with kustomize) is missing")

# The oldest Kubernetes the manifests are written for, and the newest schemas the wheel has.
K8S_VERSIONS = ("1.28", kubernetes_validate.latest_version())
SECRET = "companion-bot-secrets"
# URLs that carry a password: secrets like the SecretStr settings.
CREDENTIAL_URLS = {"DATABASE_URL", "REDIS_URL"}
# Who reads which secret (docs/operations.md, "What each secret protects"): each process
# gets these and no other.
SECRETS_BY_PROCESS = {
    "api": {
        "DATABASE_URL",
        "REDIS_URL",
        "REDIS_SENTINEL_PASSWORD",
        "GATEWAY_TOKEN",
        "GATEWAY_TOKEN_PREVIOUS",
        "ADMIN_SECRET",
    },
    "worker": {
        "DATABASE_URL",
        "REDIS_URL",
        "REDIS_SENTINEL_PASSWORD",
        "GATEWAY_TOKEN",
        "GATEWAY_TOKEN_PREVIOUS",
        "DISCORD_BOT_TOKEN",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "JEV_API_KEY",
        "JINA_API_KEY",
        "EMBEDDINGS_API_KEY",
    },
    "relay": {"DISCORD_BOT_TOKEN", "GATEWAY_TOKEN"},
    "jev": {"JEV_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"},
    "migrate": {"DATABASE_URL"},
}
# (kind, name, container) of each process, and the settings class it reads.
PROCESSES: dict[str, tuple[str, str, str, type[BaseSettings] | None]] = {
    "api": ("Deployment", "companion-bot-api", "api", Settings),
    "worker": ("Deployment", "companion-bot-worker", "worker", Settings),
    "relay": ("StatefulSet", "companion-bot-relay", "relay", RelaySettings),
    "jev": ("Deployment", "companion-bot-jev", "jev", JevSettings),
    "migrate": ("Job", "companion-bot-migrate", "migrate", None),
}
# Documented settings (the README's Configuration table) that work merged beside this one
# reads; named in the ConfigMap already so a deployment has them.
CONTRACT_SETTINGS = {
    "OPERATOR_USER_IDS",
    "MEMORY_RECALL",
    "MEMORY_RECALL_MESSAGES",
    "TURNS_PER_USER_PER_MINUTE",
    "COMMANDS_PER_USER_PER_MINUTE",
    "DMS_ENABLED",
    "DISCORD_ATTACHMENT_HOSTS",
}


def render(directory: Path) -> list[dict[str, Any]]:
    assert KUBECTL is not None
    out = subprocess.run(
        [KUBECTL, "kustomize", str(directory)], check=True, capture_output=True, text=True
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def with_keda(tmp: Path) -> Path:
    """The example overlay with `components: [../../components/keda]` added, as its own
    comment tells operators to do, rebuilt in ``tmp`` (paths made relative to it)."""
    example = K8S / "overlays" / "example"
    overlay = yaml.safe_load((example / "kustomization.yaml").read_text())
    resources = []
    for entry in overlay["resources"]:
        source = (example / entry).resolve()
        if source.is_file():
            shutil.copy(source, tmp / source.name)
            resources.append(source.name)
        else:
            resources.append(os.path.relpath(source, tmp))
    overlay["resources"] = resources
    overlay["components"] = [os.path.relpath(K8S / "components" / "keda", tmp)]
    (tmp / "kustomization.yaml").write_text(yaml.safe_dump(overlay, sort_keys=False))
    return tmp


@pytest.fixture(scope="module")
def renderings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    return {
        "base": render(K8S),
        "example": render(K8S / "overlays" / "example"),
        "example+keda": render(with_keda(tmp_path_factory.mktemp("keda"))),
    }


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [doc] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def config_maps(docs: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    return {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def container(workload: dict[str, Any], name: str) -> dict[str, Any]:
    spec = pod_spec(workload)
    containers: list[dict[str, Any]] = spec["containers"] + spec.get("initContainers", [])
    [found] = [c for c in containers if c["name"] == name]
    return found


def environment(docs: list[dict[str, Any]], box: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each variable the container gets, with where it comes from: {"config": map} for a
    ConfigMap's key, else the env entry's valueFrom (or {"value": …})."""
    maps = config_maps(docs)
    env: dict[str, dict[str, Any]] = {}
    for source in box.get("envFrom", []):
        assert "configMapRef" in source, "secrets are named one by one, never envFrom"
        for key in maps[source["configMapRef"]["name"]]:
            env[key] = {"config": source["configMapRef"]["name"]}
    for entry in box.get("env", []):
        env[entry["name"]] = entry.get("valueFrom") or {"value": entry.get("value")}
    return env


def env_names(settings: type[BaseSettings]) -> set[str]:
    return {name.upper() for name in settings.model_fields}


def secret_names(settings: type[BaseSettings]) -> set[str]:
    secret = {
        name.upper()
        for name, field in settings.model_fields.items()
        if SecretStr in (field.annotation, *getattr(field.annotation, "__args__", ()))
    }
    return secret | (env_names(settings) & CREDENTIAL_URLS)


ALL_SETTINGS = env_names(Settings) | env_names(RelaySettings) | env_names(JevSettings)
ALL_SECRETS = secret_names(Settings) | secret_names(RelaySettings) | secret_names(JevSettings)
RENDERINGS = ["base", "example", "example+keda"]


def schema_checked(docs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every object but KEDA's custom resource, which has no schema in Kubernetes."""
    return (d for d in docs if not d["apiVersion"].startswith("keda.sh/"))


# -- rendering and schemas -------------------------------------------------------------------


@pytest.mark.parametrize("rendering", RENDERINGS)
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_object_validates_against_the_kubernetes_schemas(
    renderings: dict[str, list[dict[str, Any]]], rendering: str, version: str
) -> None:
    docs = list(schema_checked(renderings[rendering]))
    assert len(docs) >= 20
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_schema_check_refuses_what_kubernetes_would(
    renderings: dict[str, list[dict[str, Any]]],
) -> None:
    worker = find(renderings["base"], "Deployment", "companion-bot-worker")
    broken = {**worker, "spec": {**worker["spec"], "replicas": "two", "paused_": True}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSIONS[0], strict=True)


def test_only_the_keda_component_adds_a_custom_resource(
    renderings: dict[str, list[dict[str, Any]]],
) -> None:
    custom = {
        r: [d["kind"] for d in docs if d["apiVersion"].startswith("keda.sh/")]
        for r, docs in renderings.items()
    }
    assert custom == {"base": [], "example": [], "example+keda": ["ScaledObject"]}


# -- settings and secrets --------------------------------------------------------------------


@pytest.mark.parametrize("rendering", RENDERINGS)
@pytest.mark.parametrize("process", list(PROCESSES))
def test_every_setting_a_process_reads_reaches_it_and_only_its_own_secrets(
    renderings: dict[str, list[dict[str, Any]]], rendering: str, process: str
) -> None:
    docs = renderings[rendering]
    kind, name, box, settings = PROCESSES[process]
    env = environment(docs, container(find(docs, kind, name), box))
    needed = (env_names(settings) - ALL_SECRETS) if settings else {"DATABASE_TRANSACTION_POOLING"}
    assert needed - set(env) == set(), "settings the process reads but is not given"
    assert set(env) & ALL_SECRETS == SECRETS_BY_PROCESS[process]


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_every_secret_comes_from_the_secret_by_its_own_name_never_a_config_map(
    renderings: dict[str, list[dict[str, Any]]], rendering: str
) -> None:
    docs = renderings[rendering]
    assert not [d for d in docs if d["kind"] == "Secret"], "no secret value in the manifests"
    for data in config_maps(docs).values():
        assert set(data) & ALL_SECRETS == set()
    for doc in docs:
        if "template" not in doc.get("spec", {}):
            continue
        spec = pod_spec(doc)
        for box in spec["containers"] + spec.get("initContainers", []):
            for variable, source in environment(docs, box).items():
                if variable in ALL_SECRETS:
                    ref = source.get("secretKeyRef") or {}
                    assert (ref.get("name"), ref.get("key")) == (SECRET, variable), source


def test_every_secret_the_app_reads_is_given_to_a_process_that_needs_it() -> None:
    assert set().union(*SECRETS_BY_PROCESS.values()) == ALL_SECRETS


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_every_config_map_key_is_a_setting(
    renderings: dict[str, list[dict[str, Any]]], rendering: str
) -> None:
    for name, data in config_maps(renderings[rendering]).items():
        assert set(data) - ALL_SETTINGS - CONTRACT_SETTINGS == set(), name


def test_the_example_overlay_turns_relevant_recall_on(
    renderings: dict[str, list[dict[str, Any]]],
) -> None:
    # SPEC: the shipped configurations, the Kubernetes overlay among them, turn it on.
    [bot] = [d for n, d in config_maps(renderings["example"]).items() if "config" in n]
    assert bot["MEMORY_RECALL"] == "relevant"


# -- processes, pods and probes ----------------------------------------------------------


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_the_api_and_workers_start_only_once_the_migration_job_has_run(
    renderings: dict[str, list[dict[str, Any]]], rendering: str
) -> None:
    docs = renderings[rendering]
    job = container(find(docs, "Job", "companion-bot-migrate"), "migrate")
    assert job["command"] == ["alembic", "upgrade", "head"]
    for name in ("companion-bot-api", "companion-bot-worker"):
        waits = container(find(docs, "Deployment", name), "wait-for-schema")
        assert waits["command"][:4] == ["python", "-m", "app", "wait-for-schema"]
        assert set(environment(docs, waits)) >= {"DATABASE_URL", "DATABASE_TRANSACTION_POOLING"}
    worker = container(find(docs, "Deployment", "companion-bot-worker"), "worker")
    assert worker["command"] == ["python", "-m", "app", "worker"]


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_every_pod_runs_non_root_on_a_read_only_root_with_requests_and_limits(
    renderings: dict[str, list[dict[str, Any]]], rendering: str
) -> None:
    workloads = [d for d in renderings[rendering] if "template" in d.get("spec", {})]
    assert len(workloads) == 5
    for workload in workloads:
        spec = pod_spec(workload)
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["automountServiceAccountToken"] is False
        for box in spec["containers"] + spec.get("initContainers", []):
            context = box["securityContext"]
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"]["drop"] == ["ALL"]
            for bound in ("requests", "limits"):
                assert set(box["resources"][bound]) == {"cpu", "memory"}


def test_the_api_is_ready_on_readyz_alive_on_healthz_and_scaled_on_cpu(
    renderings: dict[str, list[dict[str, Any]]],
) -> None:
    docs = renderings["base"]
    api = container(find(docs, "Deployment", "companion-bot-api"), "api")
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert api["livenessProbe"]["httpGet"]["path"] == "/healthz"
    hpa = find(docs, "HorizontalPodAutoscaler", "companion-bot-api")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "companion-bot-api"
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    service = find(docs, "Service", "companion-bot-api")
    assert service["spec"]["ports"][0]["port"] == 8000
    worker = container(find(docs, "Deployment", "companion-bot-worker"), "worker")
    assert worker["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert find(docs, "PodDisruptionBudget", "companion-bot-worker")["spec"]["minAvailable"] == 1


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_each_grace_period_outlasts_its_process_drain(
    renderings: dict[str, list[dict[str, Any]]], rendering: str
) -> None:
    docs = renderings[rendering]
    maps = config_maps(docs)
    [bot] = [d for n, d in maps.items() if n.startswith("companion-bot-config")]
    [relay] = [d for n, d in maps.items() if n.startswith("companion-bot-relay")]

    def grace(kind: str, name: str) -> float:
        return float(pod_spec(find(docs, kind, name))["terminationGracePeriodSeconds"])

    worker_drain = float(bot["WORKER_DRAIN_GRACE_S"]) + RELEASE_WAIT_S
    assert grace("Deployment", "companion-bot-worker") > worker_drain + 10  # + shutdown hook
    api = container(find(docs, "Deployment", "companion-bot-api"), "api")
    [graceful] = [a for a in api["command"] if a.startswith("--timeout-graceful-shutdown=")]
    api_drain = float(bot["API_DRAIN_S"]) + float(graceful.partition("=")[2])
    assert float(bot["API_DRAIN_S"]) > 0 and grace("Deployment", "companion-bot-api") > api_drain
    relay_drain = float(relay["RELAY_DRAIN_DEADLINE_S"]) + CLOSE_TIMEOUT_S
    assert grace("StatefulSet", "companion-bot-relay") > relay_drain


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_n_relay_replicas_hold_shards_zero_to_n_minus_one(
    renderings: dict[str, list[dict[str, Any]]], rendering: str
) -> None:
    docs = renderings[rendering]
    relay = find(docs, "StatefulSet", "companion-bot-relay")
    env = environment(docs, container(relay, "relay"))
    assert env["RELAY_POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    [data] = [d for n, d in config_maps(docs).items() if n.startswith("companion-bot-relay")]
    replicas = relay["spec"]["replicas"]
    count = int(data["RELAY_SHARD_COUNT"])
    pods = [f"{relay['metadata']['name']}-{n}" for n in range(replicas)]
    assert [shard_of_pod(pod, count, None) for pod in pods] == list(range(count))


def test_the_keda_component_scales_workers_on_the_jobs_due_now(
    renderings: dict[str, list[dict[str, Any]]],
) -> None:
    docs = renderings["example+keda"]
    scaled = find(docs, "ScaledObject", "companion-bot-worker")
    assert scaled["metadata"]["namespace"] == "companion-bot"
    assert scaled["spec"]["scaleTargetRef"] == {"name": "companion-bot-worker"}
    [trigger] = scaled["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    assert trigger["metadata"]["query"] == f"max({JOBS_DUE._name})"
    [bot] = [d for n, d in config_maps(docs).items() if n.startswith("companion-bot-config")]
    assert 0 < float(trigger["metadata"]["threshold"]) <= int(bot["WORKER_MAX_JOBS"])
    # KEDA owns the count; the overlay's fixed one is gone.
    assert "replicas" not in find(docs, "Deployment", "companion-bot-worker")["spec"]


# -- network policy ------------------------------------------------------------------------


def selected(policy: dict[str, Any]) -> set[str]:
    """The components a policy's podSelector picks (every one for the namespace-wide ones)."""
    selector = policy["spec"]["podSelector"]
    labels = selector.get("matchLabels", {})
    if "app.kubernetes.io/component" in labels:
        return {labels["app.kubernetes.io/component"]}
    for expression in selector.get("matchExpressions", []):
        if expression["key"] == "app.kubernetes.io/component":
            return set(expression["values"])
    return {"api", "worker", "relay", "jev", "migrate"}


def peers(rule: dict[str, Any], direction: str) -> list[str]:
    named = []
    for peer in rule.get("from" if direction == "ingress" else "to", []):
        if "podSelector" in peer and "namespaceSelector" not in peer:
            named.append(peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"])
        elif "namespaceSelector" in peer:
            named.append(peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"])
        else:
            named.append(peer["ipBlock"]["cidr"])
    return named


def flows(docs: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(component, "in"/"out", peer) for every flow a policy allows."""
    allowed = set()
    for policy in (d for d in docs if d["kind"] == "NetworkPolicy"):
        for direction, arrow in (("ingress", "in"), ("egress", "out")):
            for rule in policy["spec"].get(direction, []):
                for component in selected(policy):
                    allowed |= {(component, arrow, peer) for peer in peers(rule, direction)}
    return allowed


def test_the_network_policies_allow_only_the_documented_flows(
    renderings: dict[str, list[dict[str, Any]]],
) -> None:
    docs = renderings["example"]
    deny = find(docs, "NetworkPolicy", "companion-bot-default-deny")
    assert deny["spec"]["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in deny["spec"]
    internet, internet6, postgres, redis = "0.0.0.0/0", "::/0", "10.20.0.10/32", "10.20.1.0/28"
    dns = {(c, "out", "kube-system") for c in ("api", "worker", "relay", "jev", "migrate")}
    assert flows(docs) - dns == {
        ("relay", "out", "api"),
        ("api", "in", "relay"),
        ("worker", "out", "jev"),
        ("jev", "in", "worker"),
        *{(c, "out", postgres) for c in ("api", "worker", "migrate")},
        *{(c, "out", redis) for c in ("api", "worker")},
        *{(c, "out", net) for c in ("worker", "relay", "jev") for net in (internet, internet6)},
        *{(c, "in", "monitoring") for c in ("api", "worker", "relay")},
    }
    out = find(docs, "NetworkPolicy", "companion-bot-to-internet")["spec"]["egress"][0]
    assert "169.254.0.0/16" in out["to"][0]["ipBlock"]["except"]  # no cloud metadata
    assert out["ports"] == [{"protocol": "TCP", "port": 443}]


# Ranges no egress to "the internet" may reach (IANA's special-purpose registries), and those
# whose addresses embed an IPv4 one and so could lead back to the private ranges.
NOT_THE_INTERNET = [
    *("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16"),
    *("172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16"),
    *("198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4"),
    *("::/128", "::1/128", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64"),
    *("2001::/32", "2001:db8::/32", "2002::/16", "fc00::/7", "fe80::/10", "ff00::/8"),
    "fd00:ec2::254/128",  # the EC2 metadata service over IPv6
]


def test_the_internet_egress_excepts_every_reserved_and_embedding_range(
    renderings: dict[str, list[dict[str, Any]]],
) -> None:
    out = find(renderings["example"], "NetworkPolicy", "companion-bot-to-internet")
    blocks = [peer["ipBlock"] for peer in out["spec"]["egress"][0]["to"]]
    excepted = [ipaddress.ip_network(net) for block in blocks for net in block["except"]]
    for reserved in map(ipaddress.ip_network, NOT_THE_INTERNET):
        covering = [
            net
            for net in excepted
            if net.version == reserved.version and reserved.subnet_of(net)  # type: ignore[arg-type]
        ]
        assert covering, f"{reserved} is reachable"


def test_prometheus_reaches_only_the_metrics_ports_never_the_webhook_or_admin_api(
    renderings: dict[str, list[dict[str, Any]]],
) -> None:
    docs = renderings["example"]
    policy = find(docs, "NetworkPolicy", "companion-bot-metrics")
    [rule] = policy["spec"]["ingress"]
    opened = {port["port"] for port in rule["ports"]}
    metrics_ports = set()
    for process in selected(policy):
        kind, name, box, _ = PROCESSES[process]
        ports = container(find(docs, kind, name), box)["ports"]
        metrics_ports |= {p["containerPort"] for p in ports if p["name"] == "metrics"}
        assert process != "api" or {p["containerPort"] for p in ports} - opened == {8000}
    assert opened == metrics_ports
    api = container(find(docs, "Deployment", "companion-bot-api"), "api")
    [config] = [config_maps(docs)[s["configMapRef"]["name"]] for s in api["envFrom"]]
    assert int(config["API_METRICS_PORT"]) in opened
