"""bench.size_class keeps what a cut run measured: the summary covers only the attribute counts both programs ran,
and the driver writes its result after every child (a device lease may end it at any point)."""

from bench import size_class


def _fit(program, d, model, wall, loss=100.0):
    return {"program": program, "d": d, "model": model, "wall": wall, "compiles": 1 if model == 0 else 0,
            "compile_s": 0.5 if model == 0 else 0.0, "loss": loss, "cells": 10 * d, "levels": 2, "class": [16]}


def test_the_summary_skips_an_attribute_count_whose_second_program_was_cut():
    rows = [_fit("dense", 4, 0, 2.0), _fit("dense", 4, 1, 1.5), _fit("size_class", 4, 0, 2.5),
            _fit("size_class", 4, 1, 0.01, loss=100.1), _fit("dense", 8, 0, 3.0)]
    table = size_class.summary(rows)
    assert [r["d"] for r in table] == [4]
    (row,) = table
    assert row["dense total s"] == 3.5 and row["size-class total s"] == 2.51
    assert row["dense later fit s"] == 1.5 and row["size-class later fit s"] == 0.01
    assert abs(row["loss rel diff max"] - 1e-3) < 1e-12


def test_the_driver_hands_over_its_rows_after_every_child(monkeypatch):
    calls = []

    def fake_run(cmd, check):
        program, d, out = cmd[4], int(cmd[5]), cmd[-1]
        import json
        with open(out, "w") as f:
            json.dump([_fit(program, d, 0, 1.0)], f)

    monkeypatch.setattr(size_class.subprocess, "run", fake_run)
    rows = size_class.run([4, 8], 1, 3, 10, written=lambda rows: calls.append(len(rows)))
    assert calls == [1, 2, 3, 4] and len(rows) == 4
