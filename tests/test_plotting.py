"""mvkm.plotting: the offline animation player and the source listing."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import mvkm
from mvkm.plotting import offline_player

_PLAYER = ('<link rel="stylesheet"\nhref="https://cdnjs.cloudflare.com/ajax/libs/font-awesome/4.4.0/'
           'css/font-awesome.min.css">\n<div class="animation"><img id="_anim_img">'
           '<input id="_anim_slider" type="range" min="0" max="2">'
           '<button><i class="fa fa-play"></i></button>'
           '<button><i class="fa fa-play fa-flip-horizontal"></i></button>'
           '<button><i class="fa fa-step-forward"></i></button></div>')


def test_the_player_loads_nothing_from_the_network():
    html = offline_player(_PLAYER)
    assert "https://" not in html and "font-awesome" not in html and "fa fa-" not in html
    assert "&#9654;" in html and "&#9664;" in html and "&#8250;" in html
    assert '<input id="_anim_slider" type="range"' in html        # the control is kept


def test_a_page_that_is_not_a_player_is_refused():
    with pytest.raises(ValueError, match="slider"):
        offline_player("<div>no player</div>")
    with pytest.raises(TypeError, match="html must be a str"):
        offline_player(b"<input type=\"range\">")
    with pytest.raises(ValueError, match="remote"):
        offline_player('<input type="range"><script src="https://x.org/a.js"></script>')


@pytest.mark.skipif(importlib.util.find_spec("IPython") is None, reason="needs IPython")
def test_animation_html_renders_every_frame_offline():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation

    fig, ax = plt.subplots()
    (line,) = ax.plot([0, 1], [0, 0])
    anim = FuncAnimation(fig, lambda i: [line.set_ydata([0, i])], frames=3)
    html = mvkm.plotting.animation_html(anim).data
    assert html.count("data:image/png;base64") == 3 and "https://" not in html
    assert not plt.fignum_exists(fig.number)                          # the figure is closed
    with pytest.raises(TypeError, match="Animation"):
        mvkm.plotting.animation_html(fig)


@pytest.mark.skipif(importlib.util.find_spec("IPython") is None, reason="needs IPython")
def test_show_source_lists_the_function():
    listing = mvkm.plotting.show_source(mvkm.features.poly2_features)
    assert listing.data.startswith("def poly2_features(") and "np.triu_indices" in listing.data
    with pytest.raises(TypeError, match="function or class"):
        mvkm.plotting.show_source(np.float64(1.0))
