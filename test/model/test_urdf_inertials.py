"""Identified inertials written into a copy of a URDF: the new file loads as a body with exactly
the identified parameters, keeps everything else (comments, the other links), moves components
the recording knew nothing about only as far as physics needs, and refuses (reports) a link
it cannot make physical."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from support.simulations import config_mechanism
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.parameters import INERTIAL, body_parameters
from mbfg_ros.model.symbolic import _Inertia
from mbfg_ros.model.urdf_inertials import identified_inertials, write_identified_urdf


def body(mech: Mechanism, jid: int = 1) -> dict[str, float]:
    return dict(zip(INERTIAL, body_parameters(_Inertia.of(mech.model.inertias[jid]))))


def reload(mech: Mechanism, urdf) -> Mechanism:
    return Mechanism(dataclasses.replace(mech.config, urdf=urdf))


def test_the_written_body_has_the_identified_parameters_and_the_rest_is_kept(tmp_path):
    mech = config_mechanism("arm6")
    values = {"forearm.mx": 0.01, "forearm.mz": 0.304, "forearm.ixx": 0.08, "forearm.iyy": 0.0805, "forearm.iyz": -0.001,
              "forearm.mass": 1.6}
    out = tmp_path / "arm.urdf"
    links = write_identified_urdf(mech, values, out, note="identified -- by a test")
    assert [li.link for li in links] == ["forearm"] and not links[0].problem
    new = reload(mech, out)
    jid = new.model.getJointId("elbow")
    got = body(new, jid)
    for k, v in values.items():
        assert got[k.split(".")[1]] == pytest.approx(v, rel=1e-7, abs=1e-10), k
    old = body(mech, jid)
    assert got["izz"] == pytest.approx(old["izz"], rel=1e-7)        # not asked: as it was
    text, original = out.read_text(), open(mech.config.urdf).read()
    assert "<!-- identified - - by a test -->" in text
    for line in original.splitlines():                                 # the other links, comments
        if "forearm" not in line and "inertia" not in line and "mass" not in line and "origin xyz" not in line:
            assert line in text


def test_components_without_information_follow_the_centre_of_mass():
    """A pendulum whose first moment grows while its mass is unknown: kept as it was, its inertia
    about the length of the rod would break the triangle inequality; moved, it is physical."""
    mech = config_mechanism("pendulum")
    values = {"rod.mx": 1.1, "rod.my": -0.01, "rod.izz": 0.735}
    strict = identified_inertials(mech, values)
    assert strict[0].problem
    free = {f"rod.{f}" for f in ("mass", "mz", "ixx", "ixy", "ixz", "iyy", "iyz")}
    li = identified_inertials(mech, values, free)[0]
    assert not li.problem
    assert li.mass == 2.0 and np.allclose(li.com, [0.55, -0.005, 0.0])
    c = li.com
    assert li.inertia[2, 2] + li.mass * (c[0] ** 2 + c[1] ** 2) == pytest.approx(0.735, rel=1e-9)
    moments = np.linalg.eigvalsh(li.inertia)
    assert moments[0] > 0 and moments[0] + moments[1] >= moments[2] * (1 - 1e-6)


def test_a_link_that_cannot_be_made_physical_is_reported_and_left(tmp_path):
    mech = config_mechanism("pendulum")
    out = tmp_path / "p.urdf"
    links = write_identified_urdf(mech, {"rod.izz": -1.0}, out)
    assert "positive definite" in links[0].problem
    assert out.read_text() == open(mech.config.urdf).read()
