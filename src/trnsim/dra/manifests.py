"""Reading Kubernetes manifests: multi-document YAML with ResourceClaims, ResourceClaimTemplates,
DeviceClasses, and the workloads that reference them (Pod, Deployment, LeaderWorkerSet).

A workload becomes pods: a Pod is one; a Deployment ``replicas`` pods; a LeaderWorkerSet
``replicas`` groups of ``leaderWorkerTemplate.size`` pods, each group placed on one domain of
the ``leaderworkerset.sigs.k8s.io/exclusive-topology`` node label (e.g.
``neuron.amazonaws.com/ultraserver-server-id-4``: one UltraServer) that no other group uses,
as AWS's UltraServer templates deploy them (deploy/files/specs/*-node-inference-us.yaml).
Each pod gets one ResourceClaim per ``resourceClaimTemplateName``; a ``resourceClaimName`` is
one claim shared by every pod that names it. Other kinds are listed as ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trnsim import inputs
from trnsim.dra import _optional
from trnsim.dra.k8s import Claim, DeviceClass, ManifestError, parse_claim, parse_device_class

EXCLUSIVE_TOPOLOGY = "leaderworkerset.sigs.k8s.io/exclusive-topology"
MAX_PODS = 4096


@dataclass(frozen=True, slots=True)
class PodClaimRef:
    name: str  # the pod's name for the claim
    target: str  # template or claim name
    template: bool


@dataclass(frozen=True, slots=True)
class Pod:
    name: str
    claims: tuple[PodClaimRef, ...]
    group: str = ""  # pods of one group share one exclusive topology domain
    topology_key: str = ""


@dataclass(frozen=True, slots=True)
class Manifests:
    claims: tuple[Claim, ...]
    classes: tuple[DeviceClass, ...]
    pods: tuple[Pod, ...]
    ignored: tuple[str, ...]
    source: str

    def claim(self, name: str, template: bool) -> Claim:
        kind = "ResourceClaimTemplate" if template else "ResourceClaim"
        for c in self.claims:
            if c.name == name and c.kind == kind:
                return c
        have = [c.name for c in self.claims if c.kind == kind]
        raise ManifestError(
            f"{self.source}: a pod names {kind} {name!r}, which the file does not define "
            f"({kind}s here: {', '.join(have) or 'none'})"
        )


def load_yaml_documents(text: str, where: str) -> list[Any]:
    """Every non-empty YAML document of ``text``; a YAML error is one line with its position."""
    yaml = _optional.yaml()
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where_in = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ManifestError(f"{where}: not valid YAML: {problem}{where_in}") from None
    return docs


def _pod_claims(spec: Any, where: str) -> tuple[PodClaimRef, ...]:
    if not isinstance(spec, dict):
        return ()
    out = []
    for i, rc in enumerate(spec.get("resourceClaims") or []):
        if not isinstance(rc, dict) or "name" not in rc:
            raise ManifestError(f"{where}: spec.resourceClaims[{i}] needs a name")
        if "resourceClaimTemplateName" in rc:
            out.append(PodClaimRef(str(rc["name"]), str(rc["resourceClaimTemplateName"]), True))
        elif "resourceClaimName" in rc:
            out.append(PodClaimRef(str(rc["name"]), str(rc["resourceClaimName"]), False))
        else:
            raise ManifestError(
                f"{where}: spec.resourceClaims[{i}] needs resourceClaimTemplateName or "
                "resourceClaimName"
            )
    return tuple(out)


def _replicas(raw: Any, where: str, default: int = 1) -> int:
    n = default if raw is None else raw
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_PODS:
        raise ManifestError(f"{where}: replicas must be an integer in [0, {MAX_PODS}], got {n!r}")
    return n


def _workload_pods(doc: dict, where: str) -> list[Pod] | None:
    kind = doc.get("kind")
    meta = doc.get("metadata") or {}
    name = str(meta.get("name", kind))
    spec = doc.get("spec") or {}
    label = f"{where}: {kind} {name}"
    if kind == "Pod":
        return [Pod(name, _pod_claims(spec, label))]
    if kind in ("Deployment", "StatefulSet", "ReplicaSet", "Job"):
        n = _replicas(spec.get("replicas") if kind != "Job" else spec.get("parallelism"), label)
        tmpl = (spec.get("template") or {}).get("spec")
        claims = _pod_claims(tmpl, label)
        return [Pod(f"{name}-{i}", claims) for i in range(n)]
    if kind == "LeaderWorkerSet":
        groups = _replicas(spec.get("replicas"), label)
        lwt = spec.get("leaderWorkerTemplate") or {}
        size = _replicas(lwt.get("size"), f"{label}: leaderWorkerTemplate.size")
        if size < 1:
            raise ManifestError(f"{label}: leaderWorkerTemplate.size must be >= 1, got {size}")
        leader = _pod_claims((lwt.get("leaderTemplate") or {}).get("spec"), label)
        worker = _pod_claims((lwt.get("workerTemplate") or {}).get("spec"), label)
        key = str((meta.get("annotations") or {}).get(EXCLUSIVE_TOPOLOGY, ""))
        pods = []
        for g in range(groups):
            for w in range(size):
                claims = leader if w == 0 and leader else worker
                pname = f"{name}-{g}" if w == 0 else f"{name}-{g}-{w}"
                pods.append(Pod(pname, claims, f"{name}-{g}", key))
        return pods
    return None


def parse_documents(docs: list[Any], where: str) -> Manifests:
    claims: list[Claim] = []
    classes: list[DeviceClass] = []
    pods: list[Pod] = []
    ignored: list[str] = []
    for i, doc in enumerate(docs):
        w = f"{where} (document {i + 1})" if len(docs) > 1 else where
        if not isinstance(doc, dict) or "kind" not in doc:
            raise ManifestError(f"{w}: not a Kubernetes object (no 'kind')")
        kind = doc["kind"]
        if kind in ("ResourceClaim", "ResourceClaimTemplate"):
            claims.append(parse_claim(doc, w))
        elif kind == "DeviceClass":
            classes.append(parse_device_class(doc, w))
        else:
            got = _workload_pods(doc, w)
            if got is None:
                ignored.append(f"{kind} {(doc.get('metadata') or {}).get('name', '?')}")
            else:
                pods.extend(got)
        if len(pods) > MAX_PODS:
            raise ManifestError(f"{where}: more than {MAX_PODS} pods")
    names = [(c.kind, c.name) for c in claims]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise ManifestError(f"{where}: {dup[0]} {dup[1]!r} is defined twice")
    return Manifests(tuple(claims), tuple(classes), tuple(pods), tuple(ignored), where)


def load(path: str | Path) -> Manifests:
    p = Path(path)
    try:
        text = inputs.read_text(p, "manifest")  # a regular file, within limits
    except FileNotFoundError:
        raise ManifestError(f"no such file: {str(p)!r}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"cannot read {str(p)!r}: {exc}") from None
    return parse_documents(load_yaml_documents(text, str(p)), str(p))


def load_text(text: str, where: str = "<text>") -> Manifests:
    return parse_documents(load_yaml_documents(text, where), where)
