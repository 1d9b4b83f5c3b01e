"""Checks of the project's set-up files: Binder vs pip, CI vs README, offline HTML."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from check_offline_html import builds_animation, check_tree, problems_in_page  # noqa: E402

# conda-forge name -> PyPI name, where they differ.
CONDA_TO_PIP = {"pytorch-cpu": "torch"}
# Present in environment.yml for conda's sake only.
CONDA_ONLY = {"python", "pip"}


def _split(req: str) -> tuple[str, str]:
    """Split 'name>=1,<2' (pip) or 'name=1.2' (conda) into (normalised name, spec)."""
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", req)
    assert m, req
    name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
    spec = m.group(2).replace(" ", "")
    if spec.startswith("=") and not spec.startswith("=="):
        spec = "=" + spec  # conda's exact pin 'x=1.2' is pip's 'x==1.2'
    return name, spec


def _pyproject_requirements() -> dict[str, str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"])
    for extra in ("torch", "data", "book", "test"):
        reqs += meta["optional-dependencies"][extra]
    # the extras name the package's own extras ("mvkm[torch,data]"), listed above
    return dict(_split(r) for r in reqs if not r.startswith(meta["name"] + "["))


def _environment_requirements() -> tuple[dict[str, str], dict]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    out: dict[str, str] = {}
    for dep in env["dependencies"]:
        items = dep["pip"] if isinstance(dep, dict) else [dep]
        for item in items:
            name, spec = _split(item)
            out[CONDA_TO_PIP.get(name, name)] = spec
    return out, env


def _makefile_torch_pin() -> str:
    return re.search(r"pip install --quiet torch==(\S+)", (ROOT / "Makefile").read_text()).group(1)


def test_environment_and_pyproject_list_the_same_dependencies():
    pip_reqs = _pyproject_requirements()
    conda_reqs, env = _environment_requirements()
    for name in CONDA_ONLY:
        conda_reqs.pop(name, None)
    assert set(conda_reqs) == set(pip_reqs), (
        f"only in environment.yml: {sorted(set(conda_reqs) - set(pip_reqs))}; "
        f"only in pyproject.toml: {sorted(set(pip_reqs) - set(conda_reqs))}"
    )
    # torch: the environment pins the Makefile's version, the package states a lower bound
    mismatched = {n: (pip_reqs[n], conda_reqs[n]) for n in pip_reqs
                  if n != "torch" and pip_reqs[n] != conda_reqs[n]}
    assert not mismatched, f"version specifiers differ (pyproject, environment.yml): {mismatched}"
    assert env["channels"][0] == "conda-forge"


def test_environments_pin_python_and_torch_and_the_package_pins_nothing():
    conda_reqs, _ = _environment_requirements()
    assert re.fullmatch(r"==3\.11\.\d+", conda_reqs["python"]), conda_reqs["python"]
    pin = _makefile_torch_pin()
    assert conda_reqs["torch"] == f"=={pin}"
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["requires-python"] == ">=3.11"
    pinned = {n: s for n, s in _pyproject_requirements().items() if "==" in s}
    assert not pinned, f"a library states ranges, not exact pins: {pinned}"
    low = re.fullmatch(r">=(\d+)\.(\d+)", _pyproject_requirements()["torch"])
    assert low, _pyproject_requirements()["torch"]
    assert tuple(map(int, pin.split(".")[:2])) >= tuple(map(int, low.groups()))   # the pin satisfies it
    assert meta["optional-dependencies"]["torch"] == ["torch" + _pyproject_requirements()["torch"]]
    assert [r for r in meta["dependencies"] if r.startswith(("torch", "reservoirpy"))] == []
    for extra in ("book", "test"):
        assert "mvkm[torch,data]" in meta["optional-dependencies"][extra]


def test_postbuild_installs_the_package_without_deps():
    text = (ROOT / "postBuild").read_text()
    assert re.search(r"pip install --no-deps -e \.", text)


def _readme_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start.*?```(?:bash|sh)?\n(.*?)```", readme, re.S)
    assert block, "README.md needs a '## Quick start' section with a code block"
    return [line.strip() for line in block.group(1).splitlines()
            if line.strip() and not line.strip().startswith("#")]


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one():
    commands = _readme_commands()
    assert commands == ["make test", "make book"], commands
    ci = (ROOT / ".ci" / "run").read_text()
    ci_lines = [line.strip() for line in ci.splitlines() if line.strip() and not line.startswith("#")]
    assert "make test" in ci_lines


def test_makefile_installs_pinned_torch_before_the_package():
    text = (ROOT / "Makefile").read_text()
    torch_at = text.index("pip install --quiet torch==2.13.0")
    pkg_at = text.index('pip install --quiet -e ".[book,test]"')
    assert torch_at < pkg_at
    assert "-W -n --keep-going" in text


def test_makefile_takes_the_torch_index_from_a_variable():
    """Issue 33, item 9: pip resolves torch==2.13.0 against PyPI alone to the CUDA build; the
    Makefile takes PyTorch's CPU index from TORCH_INDEX (empty: pip's own configuration)."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make here")

    def env_commands(*args: str) -> list[str]:
        done = subprocess.run([make, "-n", "-B", "env", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=60, check=True)
        return [line for line in done.stdout.splitlines() if "pip install" in line]

    cpu = "https://download.pytorch.org/whl/cpu"
    plain = env_commands()
    assert [c for c in plain if "torch==2.13.0" in c] == [".venv/bin/python -m pip install --quiet torch==2.13.0 "]
    assert not [c for c in plain if "index-url" in c], plain
    indexed = env_commands(f"TORCH_INDEX={cpu}")
    torch_line = next(c for c in indexed if "torch==2.13.0" in c)
    assert torch_line.endswith(f"torch==2.13.0 --extra-index-url {cpu}"), torch_line
    assert [c for c in indexed if "index-url" in c] == [torch_line]     # the package's own install: PyPI
    # and every page that tells how to install torch names that index
    for page in ("README.md", "docs/package.md", "docs/teaching.md"):
        assert cpu in (ROOT / page).read_text(), page


def test_the_version_is_set_once():
    """Issue 33, item 8: mvkm/__init__.py's __version__; pyproject.toml reads it."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in meta["project"] and "version" in meta["project"]["dynamic"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "mvkm.__version__"}
    versions = re.findall(r'^__version__ = "([^"]*)"$', (ROOT / "mvkm" / "__init__.py").read_text(), re.M)
    assert len(versions) == 1, versions
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?", versions[0]), versions[0]
    for name in ("pyproject.toml", "README.md", "docs/package.md", "environment.yml", "postBuild", "Makefile"):
        assert versions[0] not in (ROOT / name).read_text(), f"{name} repeats the version {versions[0]}"


# GitHub repositories other than the project's that the project names (credits, sources).
OTHER_REPOSITORIES = {
    "computationalmodelling/nbval",     # README: the notebook checker
    "Miaoyanwang/nonparametric",        # book/references.bib: the SMM's reference code
    "cazala/mnist",                     # mvkm/data/README.md: the MNIST extract's source
}
# A repository named in a URL: github.com/o/r (git+https, git@github.com:o/r), raw files,
# Binder and Colab launch links.
_REPO_REF = re.compile(r"(?:github\.com[/:]|raw\.githubusercontent\.com/|mybinder\.org/v2/gh/"
                       r"|colab\.research\.google\.com/github/)([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)")
_NOT_PROJECT_DIRS = {".git", ".venv", "_build", "build", "dist", "_vendor", "__pycache__", ".hypothesis",
                     ".pytest_cache", ".ipynb_checkpoints", "node_modules"}
_TEXT_SUFFIXES = {".md", ".py", ".toml", ".yml", ".yaml", ".ipynb", ".cfg", ".txt", ".bib", ".in", ".html",
                  ".css", ".js", ".json", ".sh"}


def _project_text_files() -> list[Path]:
    out = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if any(part in _NOT_PROJECT_DIRS or part.endswith(".egg-info") for part in rel.parts[:-1]):
            continue
        if path.is_file() and (path.suffix in _TEXT_SUFFIXES or path.name in ("Makefile", "postBuild", "run")):
            out.append(path)
    return out


def test_the_repository_url_is_set_once():
    """Issue 33, item 8: the repository's URL is _config.yml's repository.url (the book's
    repository and Binder buttons read it); every other copy must agree with it, so
    that whoever publishes the book sets it there and this test names the lines to change."""
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    m = re.fullmatch(r"https://github\.com/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)/?", url)
    assert m, f"_config.yml: repository.url must be https://github.com/<owner>/<name>, got {url!r}"
    repo = m.group(1)
    assert repo not in OTHER_REPOSITORIES
    named, stale = set(), []
    for path in _project_text_files():
        rel = str(path.relative_to(ROOT))
        if rel == "tests/test_project.py":        # its own patterns and fixtures
            continue
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for ref in _REPO_REF.findall(line):
                ref = ref.removesuffix(".git").rstrip(".")
                if ref == repo:
                    named.add(rel)
                elif ref not in OTHER_REPOSITORIES:
                    stale.append(f"{rel}:{lineno}: {ref}")
    assert not stale, (f"_config.yml's repository.url is {url}; these lines name another repository "
                       "(set them to it, or add a third party's to OTHER_REPOSITORIES):\n" + "\n".join(stale))
    # the copies a user reads: the README's git+ line, package.md's git+ line, the package's metadata
    assert {"README.md", "docs/package.md", "pyproject.toml"} <= named, named
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"] == url


def test_book_renders_stored_outputs_and_book_full_executes():
    # `make book` renders the outputs nbval verified; `make book-full` rewrites exactly
    # this line of _config.yml to execute every notebook (issue 26, item 4).
    config = (ROOT / "_config.yml").read_text()
    assert re.search(r'^  execute_notebooks: "off"$', config, re.M)
    assert re.search(r"^    nb_output_stderr: warn$", config, re.M)
    make = (ROOT / "Makefile").read_text()
    sed = re.search(r"sed 's/\^  execute_notebooks: \"off\"\$\$/  execute_notebooks: force/' _config.yml", make)
    assert sed, "book-full must rewrite the execute_notebooks line of _config.yml"
    assert "--config _build/_config_full.yml" in make
    assert "launch_buttons:\n  notebook_interface: jupyterlab" in config


def test_every_chapter_in_the_toc_exists_and_every_notebook_is_in_the_toc():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    for f in files:
        assert any((ROOT / f"{f}{ext}").is_file() for ext in (".md", ".ipynb")), f
    notebooks = {str(p.relative_to(ROOT).with_suffix("")) for p in (ROOT / "book").rglob("*.ipynb")
                 if ".ipynb_checkpoints" not in p.parts}
    assert notebooks <= set(files), f"notebooks missing from _toc.yml: {notebooks - set(files)}"



_AUTODOC = re.compile(r"^\.\. auto(?:class|exception|function|data|module):: (\S+)$", re.M)


def test_the_api_reference_documents_every_public_name():
    # Issue 33, item 10: book/reference/ renders the docstring of every name of mvkm.__all__
    # and of its modules' __all__, a re-exported object under its public name (mvkm.KernelPPCA,
    # which the chapters link to), the others under their module (mvkm.kernels.upper_gram).
    pytest.importorskip("torch")                          # mvkm.stiefel's __all__
    import importlib
    import inspect

    import mvkm

    reference = ROOT / "book" / "reference"
    pages = {p.stem: p.read_text() for p in reference.glob("*.md")}
    entries = [name for text in pages.values() for name in _AUTODOC.findall(text)]
    documented = set(entries)
    assert len(entries) == len(documented), "a name is documented twice"
    modules = [n for n in mvkm.__all__ if inspect.ismodule(getattr(mvkm, n))]
    expected = {"mvkm"} | {f"mvkm.{n}" for n in mvkm.__all__}
    for module in modules:
        assert module in pages, f"book/reference/{module}.md is missing"
        for name in importlib.import_module(f"mvkm.{module}").__all__:
            expected.add(f"mvkm.{name}" if name in mvkm.__all__ else f"mvkm.{module}.{name}")
    assert documented == expected, (f"missing from the reference: {sorted(expected - documented)}; "
                                    f"not public: {sorted(documented - expected)}")
    # the index's tables list every top-level name, and every page is in the book
    listed = set(re.findall(r"^   ~?(?:mvkm\.)?(\w+)$", pages["index"], re.M))
    assert set(mvkm.__all__) <= listed, sorted(set(mvkm.__all__) - listed)
    toc = (ROOT / "_toc.yml").read_text()
    for page in pages:
        assert f"- file: book/reference/{page}\n" in toc, page
    for page in ("docs/package", "docs/teaching"):
        assert f"- file: {page}\n" in toc, page

@pytest.mark.parametrize(
    "html, bad",
    [
        ('<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"></script>', True),
        ('<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Lato">', True),
        ('<script>const THEBE_JS_URL = "https://unpkg.com/thebe@0.8.2/lib/index.js"</script>', True),
        ('<a href="https://mybinder.org/v2/gh/x/y/main">Binder</a>', False),
        ('<script src="../_static/mathjax/tex-chtml.js"></script><span class="math">x</span>', False),
        ('<span class="math notranslate">x</span>', True),  # math without MathJax
        # display math must come with the stylesheet that makes long lines scroll
        ('<script src="../_static/mathjax/tex-chtml.js"></script><div class="math">x</div>', True),
        ('<script src="../_static/mathjax/tex-chtml.js"></script>'
         '<link rel="stylesheet" href="../_static/mvkm.css"><div class="math">x</div>', False),
        # solutions stay collapsed until the reader opens them
        ('<div class="solution admonition" id="s">', True),
        ('<div class="solution dropdown admonition" id="s">', False),
        ('<div class="cell"><pre><span class="c1"># Exercise 1 (2 points): x</span></pre></div>', True),
        ('<div class="cell tag_hide-cell docutils"><details class="hide"><summary>s</summary><pre>'
         '<span class="c1"># Exercise 1 (2 points): x</span></pre></details>', False),
        ('<div class="cell tag_hide-input docutils"><details class="hide"><summary>s</summary><pre>'
         '<span class="c1"># Exercise 1 (2 points): x</span></pre></details>', True),   # output shown
        # the real layout: the source sits in a nested cell_input div inside the toggle
        ('<div class="cell tag_hide-cell docutils container"><details class="hide above-input"><summary>s'
         '</summary><div class="cell_input docutils container"><pre><span class="c1"># Exercise 2 (3 points): x'
         '</span></pre></div></details></div>', False),
        ('<div class="cell tag_hide-cell"><details class="hide" open><pre>'
         '<span class="c1"># Exercise 1 (1 point): x</span></pre></details>', True),
        # TeX left as text: an inline formula broken by a "+ " line, a raw \\texttt, a stray $
        ('<p>then $s(x) + \\frac12\\big(r</p><ul><li><p>\\sum_p c_p)$</p></li></ul>', True),
        ('<div class="citation"><p>Technical note, \\texttt notes/x.pdf</p></div>', True),
        ('<p>minimiser is $<span class="math notranslate">\\(x\\)</span>$</p>', True),
        # ... but not inside math, code or scripts
        ('<script src="../_static/mathjax/tex-chtml.js"></script>'
         '<p><span class="math notranslate">\\(\\frac12\\)</span> and <code>$HOME</code></p>'
         '<div class="highlight"><pre>a = "\\n"</pre></div><script>x = "\\frac"</script>', False),
    ],
)
def test_offline_html_checker(html, bad):
    assert bool(problems_in_page(html)) is bad


# Explorer pages: a notebook that builds a to_jshtml animation must give the HTML reader its slider.
_PLAYER = ('<div class="output text_html"><div class="animation"><img id="_anim_img1">'
           '<div class="anim-controls"><input id="_anim_slider1" type="range" class="anim-slider" '
           'min="0" max="1" oninput="anim1.set_frame(parseInt(this.value));">'
           '<div class="anim-buttons"><button>&#9654;</button></div></div></div></div>')
_PLAYER_NO_SLIDER = ('<div class="animation"><img id="_anim_img1"><div class="anim-controls">'
                     '<div class="anim-buttons"><button>&#9654;</button></div></div></div>')
_CODE = '<pre><span class="n">html</span> <span class="o">=</span> <span class="n">anim</span>' \
        '<span class="o">.</span><span class="n">to_jshtml</span><span class="p">()</span></pre>'


@pytest.mark.parametrize(
    "html, animated, bad",
    [
        (_PLAYER, True, False),                       # the notebook animates, the page has the slider
        ("<p>a frozen widget snapshot</p>", True, True),   # the notebook animates, the page has no player
        (_PLAYER_NO_SLIDER, True, True),              # a player whose slider is missing
        (_PLAYER_NO_SLIDER, False, True),             # ... whatever the source says
        # the range input must sit inside the player, not next to it
        (_PLAYER_NO_SLIDER + '<input type="range">', True, True),
        ("<p>no animation code, no player</p>", False, False),   # e.g. ppca/experiments before its slider
        ("<p>no animation code, no player</p>", None, False),
        (_CODE, None, True),                          # source unknown: the page's code shows to_jshtml
        (_CODE + _PLAYER, None, False),
    ],
)
def test_offline_html_checker_animation_slider(html, animated, bad):
    problems = problems_in_page(html, animated)
    assert bool(problems) is bad, problems


def test_offline_html_checker_keys_the_slider_rule_on_the_notebook_source(tmp_path):
    import nbformat

    root = tmp_path / "html"
    pages = {"book/a/explorer": ("anim.to_jshtml()", "<p>widget snapshot only</p>"),    # must fail
             "book/a/ok": ("anim.to_jshtml()", _PLAYER),
             "book/a/prose": ("x = 1", "<p>we could call <code>to_jshtml</code></p>")}   # prose only
    for rel, (code, html) in pages.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / f"{rel}.html").write_text(html)
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("`to_jshtml` in prose"),
                                             nbformat.v4.new_code_cell(code)])
        (root / "_sources" / rel).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, root / "_sources" / f"{rel}.ipynb")
    report = check_tree(root)
    assert set(report) - {"_static/mathjax"} == {"book/a/explorer.html"}
    assert "to_jshtml" in report["book/a/explorer.html"][0]


def test_offline_html_checker_accepts_matplotlibs_own_player():
    # matplotlib's template, as the chapters use it (the CDN stylesheet stripped): no problem.
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation

    fig, ax = plt.subplots(figsize=(1, 1), dpi=20)

    def frame(i):
        ax.set_title(str(i))
        return []

    anim = FuncAnimation(fig, frame, frames=2)
    html = anim.to_jshtml()
    plt.close(fig)
    html = re.sub(r'<link rel="stylesheet"\s*href="https://[^"]*font-awesome[^"]*">', "", html)
    assert problems_in_page(html, True) == []
    # and without its slider, the rule fires
    assert problems_in_page(re.sub(r'<input[^>]*type="range"[^>]*>', "", html), True)


# Test files that check the book, the gradings or the project's set-up, not the package:
# `make test-wheel` runs every other tests/test_*.py against the installed wheel.
NOT_PACKAGE_TESTS = {"assignments", "exercise_format", "harness", "mutants", "notebooks", "project", "readme",
                     "reading_path", "wheel"}


def test_make_test_wheel_runs_every_package_test_file():
    make = (ROOT / "Makefile").read_text()
    block = re.search(r"PACKAGE_TESTS := \$\(addsuffix \.py,\$\(addprefix tests/test_,(.*?)\)\)", make, re.S)
    assert block, "Makefile: PACKAGE_TESTS not found"
    listed = set(block.group(1).replace("\\", " ").split())
    files = {p.stem.removeprefix("test_") for p in (ROOT / "tests").glob("test_*.py")}
    unit = {f for f in files if f not in NOT_PACKAGE_TESTS and not f.startswith("assignments_")}
    assert listed == unit, (f"add to PACKAGE_TESTS: {sorted(unit - listed)}; "
                            f"not test files: {sorted(listed - unit)}")
    ci = (ROOT / ".ci" / "run").read_text()
    # both wheel versions side by side, beside the book (or after it)
    assert re.search(r"^make -j[3-9]\b.*\bbook test-wheel\b", ci, re.M) or "make -j2 test-wheel" in ci


@pytest.mark.parametrize("code, animated", [
    ("html = anim.to_jshtml()", True),
    ("player = mvkm.plotting.animation_html(anim)", True),
    ("plt.plot(x, y)", False),
])
def test_a_chapter_that_builds_a_player_is_known(tmp_path, code, animated):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, path)
    assert builds_animation(path) is animated


@pytest.mark.parametrize("text, animated", [
    ("```{code-cell} ipython3\nplayer = animation_html(anim)\n```\n", True),
    # the API reference's page of mvkm.plotting names the function and builds nothing
    ("```{eval-rst}\n.. autofunction:: mvkm.plotting.animation_html\n```\n", False),
    ("A chapter calls `to_jshtml` in prose only.\n", False),
])
def test_a_myst_page_builds_a_player_only_in_its_code_cells(tmp_path, text, animated):
    path = tmp_path / "page.md"
    path.write_text(text)
    assert builds_animation(path) is animated


def test_make_env_brings_the_jupyterlab_the_readme_opens_chapters_with():
    import importlib.util

    readme = (ROOT / "README.md").read_text()
    assert ".venv/bin/jupyter lab book/" in readme
    assert importlib.util.find_spec("jupyterlab") is not None, "mvkm[book] must install jupyterlab"
