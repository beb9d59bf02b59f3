"""The Kubernetes ``resource.k8s.io/v1`` objects trnsim reads and writes, as frozen dataclasses.

ResourceSlice (devices with typed attributes, shared counters, taints), DeviceClass,
ResourceClaim and ResourceClaimTemplate (``exactly`` requests with ``allocationMode`` /
``count``, CEL selectors, tolerations, ``constraints[].matchAttribute``, opaque ``config``).
Field names, defaults and the validation rules mirror the API types and their validation:
kubernetes/kubernetes ``staging/src/k8s.io/api/resource/v1/types.go`` (commit 7fc9c57) and
``pkg/apis/resource/validation``; each parse error names the object, the field path and the
value. Parsing works on plain dicts (what YAML or JSON loads to): no extra is needed here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from trnsim.errors import UsageError

API_VERSION = "resource.k8s.io/v1"
# v1beta1/v1beta2 objects of the same kinds are read too (AWS's deviceclass.yaml is v1beta1);
# the fields trnsim reads are the same except v1beta1's flat requests (no 'exactly').
READ_API_VERSIONS = (API_VERSION, "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1")

# types.go: AllocationResultsMaxSize, DeviceRequestsMaxSize, DeviceConstraintsMaxSize,
# DeviceConfigMaxSize, DeviceSelectorsMaxSize, DeviceTolerationsMaxLength.
ALLOCATION_RESULTS_MAX = 32
REQUESTS_MAX = 32
CONSTRAINTS_MAX = 32
CONFIG_MAX = 32
SELECTORS_MAX = 32
TOLERATIONS_MAX = 16

ALLOCATION_MODES = ("ExactCount", "All")
TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")
TOLERATION_OPERATORS = ("Exists", "Equal")

AttrKind = Literal["int", "bool", "string", "version"]
ATTR_KINDS: tuple[AttrKind, ...] = ("int", "bool", "string", "version")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# semver 2.0.0, as the API validates VersionValue (and cel's semver() parses)
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


class ManifestError(UsageError):
    """A Kubernetes object breaks an API rule: names the object, the field and the value."""


# ---------------------------------------------------------------------------------------------
# ResourceSlice side
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Attribute:
    """A DeviceAttribute: exactly one of int, bool, string, version (semver 2.0.0)."""

    kind: AttrKind
    value: int | bool | str

    def to_dict(self) -> dict[str, Any]:
        return {self.kind: self.value}


def attr_int(v: int) -> Attribute:
    return Attribute("int", int(v))


def attr_str(v: str) -> Attribute:
    return Attribute("string", str(v))


def attr_bool(v: bool) -> Attribute:
    return Attribute("bool", bool(v))


def attr_version(v: str) -> Attribute:
    if not SEMVER.match(v):
        raise ManifestError(f"version attribute {v!r} is not a semantic version (semver 2.0.0)")
    return Attribute("version", v)


@dataclass(frozen=True, slots=True)
class Taint:
    """A DeviceTaint: NoSchedule and NoExecute keep untolerating claims off the device."""

    key: str
    effect: str
    value: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        return out


@dataclass(frozen=True, slots=True)
class Device:
    """One device in a ResourceSlice. Attribute names are as published: a bare name belongs
    to the driver's domain, ``domain/name`` to another (``resource.aws.com/devicegroup4_id``)."""

    name: str
    attributes: tuple[tuple[str, Attribute], ...]
    consumes_counters: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()
    taints: tuple[Taint, ...] = ()

    def attribute(self, qualified: str, driver: str) -> Attribute | None:
        """The attribute named ``domain/name`` (the driver's own domain may be left off in
        the slice), as the allocator's ``lookupAttribute`` resolves a matchAttribute."""
        attrs = dict(self.attributes)
        if qualified in attrs:
            return attrs[qualified]
        domain, _, ident = qualified.partition("/")
        if ident and domain == driver:
            return attrs.get(ident)
        return None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "attributes": {k: v.to_dict() for k, v in self.attributes},
        }
        if self.consumes_counters:
            out["consumesCounters"] = [
                {"counterSet": cs, "counters": {n: {"value": str(v)} for n, v in counters}}
                for cs, counters in self.consumes_counters
            ]
        if self.taints:
            out["taints"] = [t.to_dict() for t in self.taints]
        return out


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """A ResourceSlice of one node's pool (``spec.nodeName``); ``shared_counters`` are the
    pool's counter sets (partitionable devices) that devices consume."""

    name: str
    driver: str
    pool: str
    node_name: str
    devices: tuple[Device, ...]
    shared_counters: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()
    generation: int = 1
    slice_count: int = 1

    def to_dict(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "driver": self.driver,
            "pool": {
                "name": self.pool,
                "generation": self.generation,
                "resourceSliceCount": self.slice_count,
            },
            "nodeName": self.node_name,
        }
        if self.shared_counters:
            spec["sharedCounters"] = [
                {"name": cs, "counters": {n: {"value": str(v)} for n, v in counters}}
                for cs, counters in self.shared_counters
            ]
        spec["devices"] = [d.to_dict() for d in self.devices]
        return {
            "apiVersion": API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {"name": self.name},
            "spec": spec,
        }


# ---------------------------------------------------------------------------------------------
# Claim side
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Toleration:
    """A DeviceToleration (operator Exists or Equal; empty effect tolerates every effect)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """resourceclaim.ToleratesTaint: effect (if set) and key (if set) must match; Exists
        ignores the value, Equal compares it."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(frozen=True, slots=True)
class Request:
    """A DeviceRequest with ``exactly``: a class, selectors, allocation mode and count."""

    name: str
    device_class: str
    allocation_mode: str = "ExactCount"
    count: int = 1
    selectors: tuple[str, ...] = ()
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class Constraint:
    """A DeviceConstraint: the listed requests' devices (all requests if empty) must share the
    value of ``match_attribute`` (a fully qualified name)."""

    requests: tuple[str, ...]
    match_attribute: str


@dataclass(frozen=True, slots=True)
class OpaqueConfig:
    """A DeviceClaimConfiguration's opaque driver parameters, for ``requests`` (empty: all)."""

    requests: tuple[str, ...]
    driver: str
    parameters: tuple[tuple[str, Any], ...]

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.parameters)


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[Request, ...]
    constraints: tuple[Constraint, ...] = ()
    config: tuple[OpaqueConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class Claim:
    """A ResourceClaim, or a ResourceClaimTemplate (``kind``) whose pods get one claim each."""

    kind: str
    name: str
    spec: ClaimSpec
    namespace: str = ""
    source: str = ""

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()
    config: tuple[OpaqueConfig, ...] = ()
    source: str = ""


# ---------------------------------------------------------------------------------------------
# Parsing (plain dicts -> objects), with the API's validation
# ---------------------------------------------------------------------------------------------


class _Ctx:
    """Where we are in a document, for error messages: 'file: Kind name: field.path: ...'."""

    def __init__(self, where: str):
        self.where = where

    def fail(self, path: str, message: str) -> ManifestError:
        return ManifestError(f"{self.where}: {path}: {message}")


def _get(ctx: _Ctx, obj: Any, path: str, key: str, kind: type | tuple[type, ...], default=None):
    if not isinstance(obj, dict):
        raise ctx.fail(path, f"must be a mapping, got {type(obj).__name__} {obj!r}")
    if key not in obj or obj[key] is None:
        return default
    val = obj[key]
    if kind is int and isinstance(val, bool):
        raise ctx.fail(f"{path}.{key}", f"must be an integer, got {val!r}")
    if not isinstance(val, kind):
        want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ctx.fail(f"{path}.{key}", f"must be a {want}, got {type(val).__name__} {val!r}")
    return val


def _known(ctx: _Ctx, obj: dict, path: str, allowed: tuple[str, ...]) -> None:
    unknown = [k for k in obj if k not in allowed]
    if unknown:
        raise ctx.fail(
            path,
            f"unknown field {unknown[0]!r} (known: {', '.join(allowed)}; "
            "trnsim models the resource.k8s.io/v1 fields listed)",
        )


def _name(ctx: _Ctx, path: str, value: Any, what: str = "name") -> str:
    if not isinstance(value, str) or not _DNS_LABEL.match(value) or len(value) > 63:
        raise ctx.fail(path, f"{what} {value!r} must be a DNS label (lowercase, digits, '-')")
    return value


def qualified_name_ok(name: str) -> bool:
    """A fully qualified attribute name: ``domain/identifier`` (domain a DNS subdomain of at
    most 63 characters, identifier a C identifier of at most 32)."""
    domain, sep, ident = name.partition("/")
    return bool(
        sep
        and _DNS_SUBDOMAIN.match(domain)
        and len(domain) <= 63
        and _C_IDENTIFIER.match(ident)
        and len(ident) <= 32
    )


def _selectors(ctx: _Ctx, path: str, raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ctx.fail(path, f"must be a list, got {raw!r}")
    if len(raw) > SELECTORS_MAX:
        raise ctx.fail(path, f"at most {SELECTORS_MAX} selectors, got {len(raw)}")
    out = []
    for i, sel in enumerate(raw):
        p = f"{path}[{i}]"
        cel = _get(ctx, sel, p, "cel", dict)
        if cel is None:
            raise ctx.fail(p, "a selector needs 'cel' (the only selector type)")
        expr = _get(ctx, cel, f"{p}.cel", "expression", str)
        if not expr or not expr.strip():
            raise ctx.fail(f"{p}.cel.expression", "must be a non-empty CEL expression")
        out.append(expr)
    return tuple(out)


def _tolerations(ctx: _Ctx, path: str, raw: Any) -> tuple[Toleration, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > TOLERATIONS_MAX:
        raise ctx.fail(path, f"must be a list of at most {TOLERATIONS_MAX}, got {raw!r}")
    out = []
    for i, t in enumerate(raw):
        p = f"{path}[{i}]"
        _known(ctx, t, p, ("key", "operator", "value", "effect", "tolerationSeconds"))
        op = _get(ctx, t, p, "operator", str, "Equal")
        if op not in TOLERATION_OPERATORS:
            raise ctx.fail(f"{p}.operator", f"must be Exists or Equal, got {op!r}")
        eff = _get(ctx, t, p, "effect", str, "")
        if eff and eff not in TAINT_EFFECTS:
            raise ctx.fail(f"{p}.effect", f"must be one of {', '.join(TAINT_EFFECTS)}, got {eff!r}")
        val = _get(ctx, t, p, "value", str, "")
        if op == "Exists" and val:
            raise ctx.fail(f"{p}.value", "must be empty with operator Exists")
        key = _get(ctx, t, p, "key", str, "")
        if not key and op != "Exists":
            raise ctx.fail(f"{p}.key", "an empty key needs operator Exists")
        out.append(Toleration(key=key, operator=op, value=val, effect=eff))
    return tuple(out)


def _opaque_configs(ctx: _Ctx, path: str, raw: Any, request_names: set[str] | None):
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > CONFIG_MAX:
        raise ctx.fail(path, f"must be a list of at most {CONFIG_MAX}, got {raw!r}")
    out = []
    for i, c in enumerate(raw):
        p = f"{path}[{i}]"
        _known(ctx, c, p, ("requests", "opaque"))
        reqs = _get(ctx, c, p, "requests", list, [])
        for r in reqs:
            if request_names is not None and r not in request_names:
                raise ctx.fail(
                    f"{p}.requests",
                    f"names request {r!r}, which the claim does not have "
                    f"(requests: {', '.join(sorted(request_names))})",
                )
        opaque = _get(ctx, c, p, "opaque", dict)
        if opaque is None:
            raise ctx.fail(p, "needs 'opaque' (the only configuration type)")
        driver = _get(ctx, opaque, f"{p}.opaque", "driver", str)
        if not driver or not _DNS_SUBDOMAIN.match(driver):
            raise ctx.fail(f"{p}.opaque.driver", f"must be a driver name, got {driver!r}")
        params = _get(ctx, opaque, f"{p}.opaque", "parameters", dict)
        if params is None:
            raise ctx.fail(f"{p}.opaque.parameters", "must be set (the driver's parameters)")
        out.append(OpaqueConfig(tuple(map(str, reqs)), driver, tuple(params.items())))
    return tuple(out)


def _request(ctx: _Ctx, path: str, raw: Any, beta_flat: bool) -> Request:
    if not isinstance(raw, dict):
        raise ctx.fail(path, f"must be a mapping, got {raw!r}")
    name = _name(ctx, f"{path}.name", raw.get("name"), "request name")
    if "firstAvailable" in raw:
        raise ctx.fail(
            f"{path}.firstAvailable",
            "prioritized lists (firstAvailable) are not modelled by trnsim; use 'exactly'",
        )
    if beta_flat and "exactly" not in raw:
        body, bpath = raw, path
        allowed = ("name", "deviceClassName", "selectors", "allocationMode", "count")
        _known(ctx, raw, path, (*allowed, "adminAccess", "tolerations"))
    else:
        _known(ctx, raw, path, ("name", "exactly"))
        body = _get(ctx, raw, path, "exactly", dict)
        bpath = f"{path}.exactly"
        if body is None:
            raise ctx.fail(path, "needs 'exactly' (resource.k8s.io/v1 requests)")
        _known(
            ctx,
            body,
            bpath,
            (
                "deviceClassName",
                "selectors",
                "allocationMode",
                "count",
                "adminAccess",
                "tolerations",
            ),
        )
    if body.get("adminAccess"):
        raise ctx.fail(f"{bpath}.adminAccess", "admin access is not modelled by trnsim")
    cls = _get(ctx, body, bpath, "deviceClassName", str)
    if not cls:
        raise ctx.fail(f"{bpath}.deviceClassName", "is required")
    mode = _get(ctx, body, bpath, "allocationMode", str, "ExactCount")
    if mode not in ALLOCATION_MODES:  # the API's enum is case-sensitive (dra.rst's intro
        # example writes 'all', which the API server refuses as an unsupported value)
        raise ctx.fail(
            f"{bpath}.allocationMode", f"must be ExactCount or All (case-sensitive), got {mode!r}"
        )
    count = _get(ctx, body, bpath, "count", int)
    if mode == "All" and count is not None:
        raise ctx.fail(f"{bpath}.count", f"must not be set with allocationMode All (got {count})")
    if mode == "ExactCount":
        count = 1 if count is None else count
        if count < 1:
            raise ctx.fail(f"{bpath}.count", f"must be >= 1, got {count}")
        if count > ALLOCATION_RESULTS_MAX:
            raise ctx.fail(
                f"{bpath}.count",
                f"{count} exceeds the {ALLOCATION_RESULTS_MAX} devices one claim can hold "
                "(AllocationResultsMaxSize)",
            )
    return Request(
        name=name,
        device_class=cls,
        allocation_mode=mode,
        count=count or 0,
        selectors=_selectors(ctx, f"{bpath}.selectors", body.get("selectors")),
        tolerations=_tolerations(ctx, f"{bpath}.tolerations", body.get("tolerations")),
    )


def parse_claim_spec(ctx: _Ctx, path: str, raw: Any, beta_flat: bool = False) -> ClaimSpec:
    devices = _get(ctx, raw, path, "devices", dict)
    if devices is None:
        raise ctx.fail(path, "needs 'devices'")
    dpath = f"{path}.devices"
    _known(ctx, devices, dpath, ("requests", "constraints", "config"))
    raw_reqs = _get(ctx, devices, dpath, "requests", list, [])
    if not raw_reqs:
        raise ctx.fail(f"{dpath}.requests", "needs at least one request")
    if len(raw_reqs) > REQUESTS_MAX:
        raise ctx.fail(f"{dpath}.requests", f"at most {REQUESTS_MAX}, got {len(raw_reqs)}")
    requests = tuple(
        _request(ctx, f"{dpath}.requests[{i}]", r, beta_flat) for i, r in enumerate(raw_reqs)
    )
    names = [r.name for r in requests]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise ctx.fail(f"{dpath}.requests", f"request name {dup!r} is used twice")
    constraints = []
    raw_cons = _get(ctx, devices, dpath, "constraints", list, [])
    if len(raw_cons) > CONSTRAINTS_MAX:
        raise ctx.fail(f"{dpath}.constraints", f"at most {CONSTRAINTS_MAX}, got {len(raw_cons)}")
    for i, c in enumerate(raw_cons):
        p = f"{dpath}.constraints[{i}]"
        _known(ctx, c, p, ("requests", "matchAttribute", "distinctAttribute"))
        if "distinctAttribute" in c:
            raise ctx.fail(f"{p}.distinctAttribute", "is not modelled by trnsim (alpha in 1.34)")
        reqs = _get(ctx, c, p, "requests", list, [])
        for r in reqs:
            if r not in names:
                raise ctx.fail(
                    f"{p}.requests",
                    f"names request {r!r}, which the claim does not have "
                    f"(requests: {', '.join(names)})",
                )
        attr = _get(ctx, c, p, "matchAttribute", str)
        if attr is None:
            raise ctx.fail(p, "needs matchAttribute (the only constraint trnsim models)")
        if not qualified_name_ok(attr):
            raise ctx.fail(
                f"{p}.matchAttribute",
                f"{attr!r} must be a fully qualified name, domain/identifier "
                "(e.g. resource.aws.com/devicegroup4_id)",
            )
        constraints.append(Constraint(tuple(map(str, reqs)), attr))
    config = _opaque_configs(ctx, f"{dpath}.config", devices.get("config"), set(names))
    return ClaimSpec(requests, tuple(constraints), config)


def parse_claim(doc: dict, where: str) -> Claim:
    """A ResourceClaim or ResourceClaimTemplate document."""
    kind = doc.get("kind")
    api = doc.get("apiVersion")
    meta = doc.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, dict) else None
    ctx = _Ctx(f"{where}: {kind} {name or '?'}")
    if api not in READ_API_VERSIONS:
        raise ctx.fail("apiVersion", f"must be {API_VERSION}, got {api!r}")
    if not isinstance(name, str) or not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
        raise ctx.fail("metadata.name", f"must be a DNS subdomain name, got {name!r}")
    beta_flat = api == "resource.k8s.io/v1beta1"
    if kind == "ResourceClaimTemplate":
        outer = _get(ctx, doc, "", "spec", dict)
        if outer is None:
            raise ctx.fail("spec", "is required")
        inner = _get(ctx, outer, "spec", "spec", dict)
        if inner is None:
            raise ctx.fail("spec.spec", "is required (the claim spec each pod gets)")
        spec = parse_claim_spec(ctx, "spec.spec", inner, beta_flat)
    elif kind == "ResourceClaim":
        raw = _get(ctx, doc, "", "spec", dict)
        if raw is None:
            raise ctx.fail("spec", "is required")
        spec = parse_claim_spec(ctx, "spec", raw, beta_flat)
    else:
        raise ctx.fail("kind", f"must be ResourceClaim or ResourceClaimTemplate, got {kind!r}")
    return Claim(kind, name, spec, str(meta.get("namespace") or ""), where)


def parse_device_class(doc: dict, where: str) -> DeviceClass:
    meta = doc.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, dict) else None
    ctx = _Ctx(f"{where}: DeviceClass {name or '?'}")
    if doc.get("apiVersion") not in READ_API_VERSIONS:
        raise ctx.fail("apiVersion", f"must be {API_VERSION}, got {doc.get('apiVersion')!r}")
    if not isinstance(name, str) or not _DNS_SUBDOMAIN.match(name):
        raise ctx.fail("metadata.name", f"must be a DNS subdomain name, got {name!r}")
    spec = _get(ctx, doc, "", "spec", dict, {})
    _known(ctx, spec, "spec", ("selectors", "config", "extendedResourceName"))
    return DeviceClass(
        name=name,
        selectors=_selectors(ctx, "spec.selectors", spec.get("selectors")),
        config=_opaque_configs(ctx, "spec.config", spec.get("config"), None),
        source=where,
    )


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One entry of ``status.allocation.devices.results``."""

    request: str
    driver: str
    pool: str
    device: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "adminAccess": None,
            "device": self.device,
            "driver": self.driver,
            "pool": self.pool,
            "request": self.request,
        }


@dataclass(frozen=True, slots=True)
class Allocation:
    """A claim's allocation: its devices, the node they are on and the configs that apply."""

    claim: str
    node: str
    results: tuple[AllocatedDevice, ...]
    config: tuple[OpaqueConfig, ...] = field(default=())

    def status(self) -> dict[str, Any]:
        """The claim's ``status`` as ``kubectl get resourceclaim -o yaml`` shows it."""
        alloc: dict[str, Any] = {"devices": {"results": [r.to_dict() for r in self.results]}}
        if self.config:
            alloc["devices"]["config"] = [
                {
                    "opaque": {"driver": c.driver, "parameters": c.params},
                    "requests": list(c.requests) or None,
                    "source": "FromClaim",
                }
                for c in self.config
            ]
        alloc["nodeSelector"] = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [self.node]}]}
            ]
        }
        return {"allocation": alloc}
