"""Flatten a hardware preset into rows of (key, value, unit, source) for tables, JSON and diffs.

Values are SI. A derived row's source starts with ``derived:`` and says how it is computed, so a
reader can always tell a published figure from one trnsim computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trnsim.hw.specs import ChipSpec, CoreSpec, EngineSpec, SystemSpec

Preset = CoreSpec | ChipSpec | SystemSpec


@dataclass(frozen=True, slots=True)
class Row:
    """One figure of a preset. ``key`` is dotted (``peak_flops.mxfp8``); ``value`` is SI."""

    key: str
    value: float | int | str | bool | None
    unit: str
    source: str


def _src(spec: Any, field_name: str) -> str:
    source = spec.sources.get(field_name, "")
    note = spec.notes.get(field_name)
    return f"{source} [note: {note}]" if note else source


def _engine_rows(prefix: str, eng: EngineSpec) -> list[Row]:
    rows = [
        Row(f"{prefix}.clock_hz", eng.clock_hz, "Hz", _src(eng, "clock_hz")),
        Row(
            f"{prefix}.elems_per_cycle.fast",
            eng.elems_per_cycle["fast"],
            "elem/cycle",
            _src(eng, "elems_per_cycle"),
        ),
        Row(
            f"{prefix}.elems_per_cycle.other",
            eng.elems_per_cycle["other"],
            "elem/cycle",
            _src(eng, "elems_per_cycle"),
        ),
    ]
    if eng.fp32_flops is not None:
        rows.append(Row(f"{prefix}.fp32_flops", eng.fp32_flops, "FLOP/s", _src(eng, "fp32_flops")))
    if eng.static_latency_cycles is not None:
        rows.append(
            Row(
                f"{prefix}.static_latency_cycles",
                eng.static_latency_cycles,
                "cycles",
                _src(eng, "static_latency_cycles"),
            )
        )
    return rows


def core_rows(core: CoreSpec) -> list[Row]:
    t = core.tensor
    rows = [
        Row("name", core.name, "", ""),
        Row("generation", core.generation, "", _src(core, "generation")),
        Row("partitions", core.partitions, "", _src(core, "partitions")),
        Row("sbuf_bytes", core.sbuf_bytes, "B", _src(core, "sbuf_bytes")),
        Row(
            "sbuf_bytes_per_partition",
            core.sbuf_bytes_per_partition,
            "B",
            "derived: sbuf_bytes / partitions",
        ),
        Row("psum_bytes", core.psum_bytes, "B", _src(core, "psum_bytes")),
        Row("psum_banks", core.psum_banks, "", _src(core, "psum_banks")),
        Row(
            "psum_bank_bytes",
            core.psum_bank_bytes,
            "B",
            "derived: psum_bytes / partitions / psum_banks",
        ),
        Row("min_ii_cycles", core.min_ii_cycles, "cycles", _src(core, "min_ii_cycles")),
        Row(
            "static_latency_cycles",
            core.static_latency_cycles,
            "cycles",
            _src(core, "static_latency_cycles"),
        ),
        Row("supports_mx", core.supports_mx, "", ""),
        Row("tensor.array", f"{t.rows}x{t.cols}", "", _src(t, "rows")),
        Row("tensor.clock_hz", t.clock_hz, "Hz", _src(t, "clock_hz")),
    ]
    for dtype in t.rate:
        rows.append(
            Row(
                f"tensor.peak_flops.{dtype}",
                t.peak_flops(dtype),
                "FLOP/s",
                f"derived: {t.rows}x{t.cols} x 2 FLOP x clock x rate {t.rate[dtype]}",
            )
        )
    for dtype, value in t.published_peak_flops.items():
        rows.append(
            Row(
                f"tensor.published_peak_flops.{dtype}",
                value,
                "FLOP/s",
                _src(t, "published_peak_flops"),
            )
        )
    for dtype, value in t.moving_fmax.items():
        rows.append(Row(f"tensor.moving_fmax.{dtype}", value, "elem", _src(t, "moving_fmax")))
    for eng in (core.vector, core.scalar, core.gpsimd):
        rows += _engine_rows(eng.name, eng)
    d = core.dma
    rows += [
        Row("dma.engines", d.engines, "", _src(d, "engines")),
        Row("dma.engine_bw", d.engine_bw, "B/s", _src(d, "engine_bw")),
        Row("dma.core_bw", d.core_bw, "B/s", "derived: engines x engine_bw"),
        Row("dma.fixed_latency_s", d.fixed_latency_s, "s", _src(d, "fixed_latency_s")),
        Row("dma.descriptor_s", d.descriptor_s, "s", _src(d, "descriptor_s")),
        Row("dma.element_s", d.element_s, "s", _src(d, "element_s")),
    ]
    return rows


def chip_rows(chip: ChipSpec) -> list[Row]:
    rows = [
        Row("name", chip.name, "", ""),
        Row("vendor", chip.vendor, "", ""),
        Row("projected", chip.projected, "", _src(chip, "projected")),
        Row("core", chip.core.name if chip.core else None, "", ""),
        Row("cores", chip.cores, "", _src(chip, "cores")),
        Row("hbm_bytes", chip.hbm_bytes, "B", _src(chip, "hbm_bytes")),
        Row("hbm_bw", chip.hbm_bw, "B/s", _src(chip, "hbm_bw")),
        Row("tdp_w", chip.tdp_w, "W", _src(chip, "tdp_w")),
        Row("link.name", chip.link.name, "", ""),
        Row("link.bw_per_chip", chip.link.bw_per_chip, "B/s", _src(chip.link, "bw_per_chip")),
        Row("link.direction", chip.link.direction, "", _src(chip.link, "direction")),
        Row(
            "link.bw_per_direction",
            chip.link.bw_per_direction,
            "B/s",
            f"derived: bw_per_chip ({chip.link.direction})"
            + (" / 2" if chip.link.direction == "bidirectional" else ""),
        ),
        Row("link.latency_s", chip.link.latency_s, "s", _src(chip.link, "latency_s")),
    ]
    for dtype, value in chip.peak_flops.items():
        rows.append(Row(f"peak_flops.{dtype}", value, "FLOP/s", _src(chip, "peak_flops")))
    for dtype, value in chip.sparse_peak_flops.items():
        rows.append(
            Row(f"sparse_peak_flops.{dtype}", value, "FLOP/s", _src(chip, "sparse_peak_flops"))
        )
    if chip.core is not None:
        for dtype in chip.core.tensor.rate:
            rows.append(
                Row(
                    f"tensor_engine_peak_flops.{dtype}",
                    chip.tensor_engine_peak(dtype),
                    "FLOP/s",
                    f"derived: {chip.cores} cores x per-core Tensor engine peak",
                )
            )
    if chip.sparsity_patterns:
        rows.append(Row("sparsity_patterns", " ".join(chip.sparsity_patterns), "", ""))
    rows.append(Row("dtypes", " ".join(chip.dtypes), "", ""))
    return rows


def system_rows(system: SystemSpec) -> list[Row]:
    chip = system.chip
    rows = [
        Row("name", system.name, "", ""),
        Row("kind", system.kind, "", ""),
        Row("chip", chip.name, "", ""),
        Row("chips", system.chips, "", _src(system, "chips")),
        Row("chips_per_server", system.chips_per_server, "", _src(system, "chips_per_server")),
        Row("servers", system.servers, "", "derived: chips / chips_per_server"),
        Row("host_cpu", system.host_cpu, "", ""),
    ]
    for dtype in chip.peak_flops:
        rows.append(
            Row(
                f"peak_flops.{dtype}",
                system.peak_flops(dtype),
                "FLOP/s",
                f"derived: {system.chips} x {chip.name} peak",
            )
        )
    rows += [
        Row("hbm_bytes", system.hbm_bytes, "B", f"derived: {system.chips} x {chip.name} HBM"),
        Row("hbm_bw", system.hbm_bw, "B/s", f"derived: {system.chips} x {chip.name} HBM bw"),
        Row(
            "link_bw",
            system.link_bw,
            "B/s",
            f"derived: {system.chips} x {chip.link.name} bw ({chip.link.direction})",
        ),
        Row(
            "scale_up_chips",
            system.scale_up_chips,
            "chips",
            "derived: largest span below the scale-out network",
        ),
    ]
    for lvl in system.levels:
        p = f"levels.{lvl.name}"
        rows += [
            Row(
                f"{p}.kind",
                lvl.kind + (f" {'x'.join(map(str, lvl.dims))}" if lvl.dims else ""),
                "",
                "",
            ),
            Row(f"{p}.span", lvl.span, "chips", _src(lvl, "span")),
            Row(f"{p}.bw_per_chip", lvl.bw_per_chip, "B/s", _src(lvl, "bw_per_chip")),
            Row(f"{p}.direction", lvl.direction, "", _src(lvl, "direction")),
            Row(
                f"{p}.bw_per_direction",
                lvl.bw_per_direction,
                "B/s",
                f"derived: bw_per_chip ({lvl.direction})"
                + (" / 2" if lvl.direction == "bidirectional" else ""),
            ),
            Row(f"{p}.latency_s", lvl.latency_s, "s", _src(lvl, "latency_s")),
        ]
        if lvl.rails:
            rows.append(Row(f"{p}.rails", lvl.rails, "", _src(lvl, "rails")))
    return rows


def rows(preset: Preset) -> list[Row]:
    """Every figure of ``preset`` as rows, published and derived."""
    if isinstance(preset, SystemSpec):
        return system_rows(preset)
    if isinstance(preset, ChipSpec):
        return chip_rows(preset)
    return core_rows(preset)


def kind_of(preset: Preset) -> str:
    return {SystemSpec: "system", ChipSpec: "chip", CoreSpec: "core"}[type(preset)]


def to_dict(preset: Preset) -> dict[str, Any]:
    """JSON-ready: ``{"kind", "name", "values": {key: SI value}, "units", "sources"}``."""
    rs = rows(preset)
    return {
        "kind": kind_of(preset),
        "name": preset.name,
        "values": {r.key: r.value for r in rs},
        "units": {r.key: r.unit for r in rs if r.unit},
        "sources": {r.key: r.source for r in rs if r.source},
    }
