"""Without the torch extra: `import trnsim` and every other verb work, and the PyTorch front end
says how to install it (PyTorch hidden from a subprocess by a meta-path finder)."""

import subprocess
import sys
import textwrap

# A meta-path finder that makes `import torch` fail, as on a machine without the extra.
NO_TORCH = textwrap.dedent(
    """
    import sys
    class _NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError("No module named 'torch'", name="torch")
    sys.meta_path.insert(0, _NoTorch())
    """
)


def _run_without_torch(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", NO_TORCH + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_trnsim_works_without_torch_and_the_torch_entry_points_say_how_to_install():
    res = _run_without_torch(
        """
        import trnsim, trnsim.torch
        from trnsim.cli.main import main
        assert "torch" not in sys.modules
        assert main(["specs", "trn3", "--json"]) == 0
        from trnsim.torch.gemm import gemm  # NumPy only: works without the extra
        try:
            trnsim.torch.trn3
        except ImportError as e:
            print("ERR", e)
        print("EXIT", main(["torch-demo", "--no-png"]))
        """
    )
    assert res.returncode == 0, res.stderr
    assert 'pip install "trnsim[torch]"' in res.stdout
    assert "EXIT 2" in res.stdout
    err = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("trnsim torch-demo: error:") and "[torch]" in err[0]
