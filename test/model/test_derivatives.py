"""Every analytic derivative of the model against central finite differences, on every example
rig and on every closure kind, at random states."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

from conftest import CONFIG, EXAMPLES, ROOT, mechanism
from mbfg_ros.model.config import parse_rig_config
from mbfg_ros.model.mechanism import Mechanism
from support.all_kinds import all_kinds_mechanism
from support.finite_differences import assert_jacobian, jacobian


@pytest.fixture(scope="module")
def all_kinds() -> Mechanism:
    return all_kinds_mechanism()


def random_state(mech: Mechanism, seed: int):
    rng = np.random.default_rng(seed)
    n = mech.n
    return (rng.uniform(-np.pi, np.pi, n) * 0.5, rng.standard_normal(n), rng.standard_normal(n),
            rng.standard_normal(mech.m) * 10, rng.standard_normal(mech.n_u) * 5)


def check_closures(mech: Mechanism, seed: int) -> None:
    d = mech.create_data()
    q, v, a, lam, _ = random_state(mech, seed)
    e = mech.closures(d, q, v, a, lam)
    assert_jacobian(e.phi_q, jacobian(lambda x: mech.closures(d, x).phi, q), "Phi_q")
    np.testing.assert_allclose(e.phid, e.phi_q @ v, atol=1e-10, err_msg="Phi' = Phi_q v")
    assert_jacobian(e.phid_q, jacobian(lambda x: mech.closures(d, x, v).phid, q), "d(Phi_q v)/dq")
    assert_jacobian(e.phid_v, e.phi_q, "d(Phi_q v)/dv")
    np.testing.assert_allclose(e.phidd, e.phi_q @ a + e.phid_q @ v, atol=1e-9,
                               err_msg="Phi'' = Phi_q a + (Phi_q)' v")
    assert_jacobian(e.phidd_q, jacobian(lambda x: mech.closures(d, x, v, a).phidd, q), "dPhi''/dq")
    assert_jacobian(e.phidd_v, jacobian(lambda x: mech.closures(d, q, x, a).phidd, v), "dPhi''/dv")
    assert_jacobian(e.phidd_a, e.phi_q, "dPhi''/da")
    assert_jacobian(e.hess_lambda, jacobian(lambda x: mech.closures(d, x).phi_q.T @ lam, q),
                    "d(Phi_q^T lambda)/dq")
    np.testing.assert_allclose(e.hess_lambda, e.hess_lambda.T, atol=1e-8, err_msg="Hessian symmetry")


def check_dynamics(mech: Mechanism, seed: int) -> None:
    d = mech.create_data()
    q, v, a, lam, u = random_state(mech, seed)
    tau = np.random.default_rng(seed + 1).standard_normal(mech.n)
    for s, mscale in ((1.0, 1.0), (0.7, 1.3)):
        def r(qq=q, vv=v, aa=a, ll=lam, uu=u, ss=s, mm=mscale):
            return mech.inverse_dynamics(d, qq, vv, aa, ll, tau, uu, ss, mm).r
        e = mech.inverse_dynamics(d, q, v, a, lam, tau, u, s, mscale)
        assert_jacobian(e.r_q, jacobian(lambda x: r(qq=x), q), f"dr/dq (s={s})", rtol=2e-6)
        assert_jacobian(e.r_v, jacobian(lambda x: r(vv=x), v), "dr/dv")
        assert_jacobian(e.r_a, jacobian(lambda x: r(aa=x), a), "dr/da")
        assert_jacobian(e.r_lam, jacobian(lambda x: r(ll=x), lam), "dr/dlambda")
        if mech.n_u:
            assert_jacobian(e.r_u, jacobian(lambda x: r(uu=x), u), "dr/du")
        assert_jacobian(e.r_s, jacobian(lambda x: r(ss=x[0]), np.array([s])), "dr/dgravity_scale")
        if mech.body_model is not None:
            assert_jacobian(e.r_mass, jacobian(lambda x: r(mm=x[0]), np.array([mscale])), "dr/dmass_scale")


def check_sensors(mech: Mechanism, seed: int) -> None:
    d = mech.create_data()
    q, v, a, lam, u = random_state(mech, seed)
    tau = np.random.default_rng(seed + 2).standard_normal(mech.n)
    for k, g in enumerate(mech.gyros):
        y, yq, yv = g.evaluate(mech, d, q, v)
        np.testing.assert_allclose(y, g.evaluate(mech, d, q, v, derivatives=False), atol=1e-12)
        assert_jacobian(yq, jacobian(lambda x: g.evaluate(mech, d, x, v, derivatives=False), q), f"gyro {k} dq")
        assert_jacobian(yv, jacobian(lambda x: g.evaluate(mech, d, q, x, derivatives=False), v), f"gyro {k} dv")
    for k, cell in enumerate(mech.load_cells):
        def y(qq=q, vv=v, aa=a, ll=lam, uu=u):
            return cell.evaluate(mech, d, qq, vv, aa, ll, uu, tau, derivatives=False)[0]
        val, yq, yv, ya, yl, yu = cell.evaluate(mech, d, q, v, a, lam, u, tau)
        yv = np.zeros(mech.n) if yv is None else yv
        ya = np.zeros(mech.n) if ya is None else ya
        name = cell.config.name
        rtol = 1e-5 if cell.config.measures == "joint" else 1e-6
        assert_jacobian(yq, jacobian(lambda x: y(qq=x), q), f"{name} dq", rtol)
        assert_jacobian(yv, jacobian(lambda x: y(vv=x), v), f"{name} dv", rtol)
        assert_jacobian(ya, jacobian(lambda x: y(aa=x), a), f"{name} da", rtol)
        assert_jacobian(yl, jacobian(lambda x: y(ll=x), lam), f"{name} dlambda", rtol)
        if mech.n_u:
            assert_jacobian(yu, jacobian(lambda x: y(uu=x), u), f"{name} du", rtol)


@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.parametrize("seed", [0, 1])
def test_example_derivatives(name, seed):
    mech = mechanism(name)
    check_closures(mech, seed)
    check_dynamics(mech, seed)
    check_sensors(mech, seed)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_closure_kind_and_sensor_kind(all_kinds, seed):
    assert all_kinds.m == 3 + 2 + 5 + 5 + 2 + 6 + 1
    check_closures(all_kinds, seed)
    check_dynamics(all_kinds, seed)
    check_sensors(all_kinds, seed)


def test_friction_derivative(all_kinds):
    v = np.array([0.3, -0.001, 0.0, 2.0])
    f, df = all_kinds.friction(v)
    assert_jacobian(np.diag(df), jacobian(lambda x: all_kinds.friction(x)[0], v), "friction")


def test_closure_external_forces_reproduce_phi_q_transpose_lambda(all_kinds):
    """The per-body reaction wrenches used for joint load cells add up to Phi_q^T lambda."""
    import pinocchio as pin
    d = all_kinds.create_data()
    q, v, a, lam, _ = random_state(all_kinds, 5)
    fext = all_kinds.closure_external_forces(d, q, lam)
    with_f = pin.rnea(all_kinds.model, all_kinds.model.createData(), q, v, a, fext)
    without = pin.rnea(all_kinds.model, all_kinds.model.createData(), q, v, a)
    _, J = all_kinds.closure_position(d, q)
    np.testing.assert_allclose(without - with_f, J.T @ lam, atol=1e-9)
