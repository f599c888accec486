"""A recipe mesh on CUDA needs as many devices as it names (issue 34): one check, shared by
the worker's device probe and the simulated group, refuses a mesh larger than the CUDA
devices torch sees, naming the mesh and both counts; on the CPU any mesh is simulated."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from capture.recipe.model import MeshSetup  # noqa: E402
from capture.torch.dtensors import require_mesh_devices  # noqa: E402
from capture.worker.errors import CaptureError  # noqa: E402

pytestmark = pytest.mark.torch

MESH = MeshSetup((("data", 2, "default"), ("model", 4, "default")))


def test_a_cuda_mesh_larger_than_the_devices_is_refused_naming_both_counts(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    with pytest.raises(CaptureError) as err:
        require_mesh_devices(MESH, "cuda")
    assert err.value.error_type == "DeviceUnavailable"
    assert str(err.value.message).startswith("the mesh data=2,model=4 needs 8 CUDA devices; torch sees 4.")
    assert err.value.details == {"needed": 8, "available": 4, "mesh": {"data": 2, "model": 4}}


def test_a_cuda_mesh_that_fits_and_any_cpu_mesh_pass(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    require_mesh_devices(MESH, "cuda")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    require_mesh_devices(MESH, "cpu")
