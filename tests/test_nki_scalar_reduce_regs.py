"""The Scalar engine's ``reduce_regs`` (``nisa.activation`` / ``activate2`` ``reduce_cmd``, NKI
0.6 ``activation`` docstring): ``reset_reduce`` stores this instruction's free-dim reduction,
``reduce`` reduces onto the registers, ``reset`` zeroes them, ``idle`` leaves them;
``reduce_res`` reads them out. The state persists across instructions, in program order."""

import numpy as np

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl


def test_reduce_regs_accumulate_across_activations():
    def k(a, b):
        out = nl.ndarray((4, 8, 1), nl.float32, buffer=nl.shared_hbm)
        ta = nl.ndarray((8, 16), nl.float32, buffer=nl.sbuf)
        tb = nl.ndarray((8, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a)
        nisa.dma_copy(dst=tb, src=b)
        junk = nl.ndarray((8, 16), nl.float32, buffer=nl.sbuf)
        res = [nl.ndarray((8, 1), nl.float32, buffer=nl.sbuf) for _ in range(4)]
        rc = nisa.reduce_cmd
        # reset_reduce: regs = sum(exp(a)); read out
        nisa.activation(
            junk, nl.exp, ta, reduce_op=nl.add, reduce_res=res[0], reduce_cmd=rc.reset_reduce
        )
        # reduce without reading out, then idle with a read-out of its own reduction
        nisa.activation(junk, nl.copy, tb, reduce_op=nl.add, reduce_cmd=rc.reduce)
        nisa.activation(junk, nl.copy, tb, reduce_op=nl.add, reduce_res=res[2])
        # a read-out after reduce: regs = sum(exp(a)) + sum(b) ... through a reduce of zeros
        nisa.activation(
            junk, nl.copy, tb, scale=0.0, reduce_op=nl.add, reduce_res=res[1], reduce_cmd=rc.reduce
        )
        nisa.activation(junk, nl.copy, tb, reduce_cmd=rc.reset)
        nisa.activation(
            junk, nl.copy, tb, scale=0.0, reduce_op=nl.add, reduce_res=res[3], reduce_cmd=rc.reduce
        )
        for i, r in enumerate(res):
            nisa.dma_copy(dst=out[i], src=r)
        return out

    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((8, 16)).astype(np.float32)
    got = nki.run(k, a, b).outputs[..., 0]
    sa = np.exp(a.astype(np.float64)).sum(axis=1)
    sb = b.astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(got[0], sa, rtol=1e-6)
    np.testing.assert_allclose(got[1], sa + sb, rtol=1e-6)
    np.testing.assert_allclose(got[2], sb, rtol=1e-6, atol=1e-6)  # idle: its own reduction
    np.testing.assert_array_equal(got[3], np.zeros(8))  # reset, then + 0
