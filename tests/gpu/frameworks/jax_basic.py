# SPDX-License-Identifier: MIT
"""JAX (issue #11): finds a GPU (under openmps once said "no supported devices found"), a
jitted function and a matrix product, checked against NumPy. Prints only deterministic lines;
exit 77 when JAX is missing."""
import sys

try:
    import jax
    import jax.numpy as jnp
    import numpy as np
except ImportError as e:
    print("SKIP: no JAX (%s)" % e, file=sys.stderr)
    sys.exit(77)

gpus = [d for d in jax.devices() if d.platform == "gpu"]
print("a GPU device: %s" % bool(gpus))
if not gpus:
    print("devices: %r" % jax.devices(), file=sys.stderr)
    sys.exit(1)
rng = np.random.default_rng(3)
a = rng.random((256, 256), dtype=np.float32)
b = rng.random((256, 256), dtype=np.float32)


@jax.jit
def f(x, y):
    return jnp.tanh(x @ y) + 0.5 * x


got = np.asarray(f(jnp.asarray(a), jnp.asarray(b)))
ref = np.tanh(a.astype(np.float64) @ b) + 0.5 * a
ok = np.allclose(got, ref, rtol=1e-3, atol=1e-3)
print("jit(tanh(a @ b) + a / 2) within 1e-3: %s" % ok)
sys.exit(0 if ok else 1)
