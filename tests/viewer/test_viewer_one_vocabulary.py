"""One definition per contract: the browser app receives the words for group kinds and
value roles (``api/capture`` ``vocabulary``) and the setup form's dtype and generator
lists and profile-name rule (``api/setup`` ``schema``, from ``capture.recipe``) from the
server, and keeps no copy of them."""

from __future__ import annotations

import re
from pathlib import Path

from capture import recipe
from viewer.projection import projection
from viewer.projection.projection import Projection, vocabulary
from viewer.server.handlers import form_schema

from viewer_fixtures import tiny_capture

STATIC = Path(projection.__file__).resolve().parents[1] / "static"


def test_api_capture_carries_the_vocabulary_of_kinds_and_roles():
    v = Projection(tiny_capture()).summary()["vocabulary"]
    assert v == vocabulary()
    assert v["kinds"]["jit"]["sublabel"] == "jit · tracing scope"
    assert v["kinds"]["module"]["sublabel"] == "module instance"
    assert v["kinds"]["chunk"]["long"] == projection.CHUNK_WORDING[1]
    # body / body_result: the parameters and results of an unexecuted control-flow body
    assert set(v["roles"]) == {"input", "param", "buffer", "variable", "const", "body", "body_result"}
    assert v["weight_roles"] == sorted(projection.WEIGHT_ROLES)


def test_the_setup_schema_is_the_recipes_own():
    s = form_schema()
    assert s["dtypes"] == list(recipe.DTYPES) and {"uint16", "uint32", "uint64", "complex128"} <= set(s["dtypes"])
    assert s["generators"] == list(recipe.GENERATORS)
    rule = re.compile(s["profile_name"])
    assert rule.match("jax_example") and not rule.match("has.dot") and not rule.match("x" * 129)
    assert s["profile_name"] == recipe.PROFILE_NAME.pattern
    # The suggested name is made by the same rule: what profile_name() turns into "_".
    assert re.sub(s["profile_name_invalid"], "_", "pkg.model:Net")[: s["profile_name_max"]] == \
        recipe.profile_name("pkg.model:Net") == "pkg_model_Net"
    assert s["profile_name_rule"] == recipe.PROFILE_NAME_RULE


def test_the_browser_app_keeps_no_copy_of_them():
    app = {p.name: p.read_text() for p in STATIC.rglob("*.js") if "vendor" not in p.parts}
    for name, text in app.items():
        assert "tracing scope" not in text, name  # group-kind wording comes from the server
        assert "module parameter (nn.Parameter)" not in text, name  # role sentences too
    # The setup form (setup.js, its types and its value readers).
    form = app["setup.js"] + app["setup-types.js"] + app["setup-values.js"]
    assert "bfloat16" not in form and "randint" not in form
    # No profile-name rule of its own (a character class, a length, the wording).
    assert "A-Za-z0-9" not in form and "128" not in form
    assert "letters, digits" not in form
