import pytest
import torch

from rooflow import timing
from rooflow.dataset import SubsetSpec, build_subset, load_subset
from rooflow.errors import RooflowError
from rooflow.timing import RunSpec, is_out_of_memory, measure, summarize_seconds


@pytest.fixture(scope="module")
def subset(tmp_path_factory):
    folder = tmp_path_factory.mktemp("subset")
    build_subset(SubsetSpec(None, 2, 2, 64, 56, 0), folder / "s.pt", folder / "m.csv")
    return load_subset(folder / "s.pt")


def test_summarize_seconds_closed_form():
    stats = summarize_seconds([1.0, 2.0, 3.0, 4.0, 5.0])
    assert stats["median_seconds"] == 3.0
    assert stats["min_seconds"] == 1.0 and stats["max_seconds"] == 5.0
    assert stats["iqr_seconds"] == pytest.approx(2.0)  # q3 4 - q1 2
    assert stats["spread"] == pytest.approx(2.0 / 3.0)
    assert summarize_seconds([0.5], "forward_")["forward_median_seconds"] == 0.5


def test_cpu_training_measurement_records_phases_and_environment(subset):
    record = measure(RunSpec("squeezenet1_0", 2, "fp32", "training", "cpu", 1, 3, 1), subset)
    assert record["status"] == "ok" and record["timer"] == "perf_counter_ns"
    assert len(record["seconds"]) == 3 and all(s > 0 for s in record["seconds"])
    # the iteration is the sum of its phases
    for total, f, b, o in zip(record["seconds"], record["forward_seconds"], record["backward_seconds"],
                              record["optimizer_seconds"]):
        assert total == pytest.approx(f + b + o)
    assert record["threads"] == 1
    assert record["images_per_second"] == pytest.approx(2 / record["median_seconds"])
    assert record["environment"]["torch"] == torch.__version__
    assert record["params"] == 1_248_424  # squeezenet1_0, 1000 classes


def test_inference_runs_without_grad(subset):
    record = measure(RunSpec("squeezenet1_0", 1, "fp32", "inference", "cpu", 0, 2, 1), subset)
    assert record["status"] == "ok" and "backward_seconds" not in record
    assert record["forward_seconds"] == record["seconds"]


def test_out_of_memory_becomes_a_result_row(subset, monkeypatch):
    def explode(self, clock=None):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.06 GiB")

    monkeypatch.setattr(timing.Runner, "step", explode)
    record = measure(RunSpec("squeezenet1_0", 1, "fp32", "training", "cpu", 1, 2, 1), subset)
    assert record["status"] == "oom"
    assert "Tried to allocate" in record["message"]
    assert "seconds" not in record


def test_other_errors_are_not_swallowed(subset, monkeypatch):
    def explode(self, clock=None):
        raise ValueError("a bug")

    monkeypatch.setattr(timing.Runner, "step", explode)
    with pytest.raises(ValueError):
        measure(RunSpec("squeezenet1_0", 1, "fp32", "training", "cpu", 1, 2, 1), subset)


def test_is_out_of_memory_recognises_cpu_and_cuda_messages():
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate"))
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory"))
    assert not is_out_of_memory(RuntimeError("shape mismatch"))


def test_cuda_run_without_gpu_says_what_to_do(subset):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: this checks the message on machines without one")
    with pytest.raises(RooflowError, match="no CUDA GPU"):
        measure(RunSpec("squeezenet1_0", 1, "fp32", "inference", "cuda", 0, 1, 1), subset)


def test_fp32_turns_tf32_off_and_tf32_turns_it_on():
    timing.configure_precision("tf32", "cuda")
    assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32
    timing.configure_precision("fp32", "cuda")
    assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
