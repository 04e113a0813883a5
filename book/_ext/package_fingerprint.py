"""Re-execute every chapter when the ``mini_llm`` package changes.

jupyter-cache reuses a chapter's outputs as long as the chapter's own code is unchanged, and
Sphinx re-reads only edited pages. Both would keep showing results computed by an older
``mini_llm``. This extension hashes the package's source; when the hash differs from the one
stored beside the execution cache, it empties the cache and marks every page as outdated, so the
book never shows numbers that the current code would not produce.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)
FINGERPRINT_FILE = "mini_llm.sha256"


def package_fingerprint(package_dir: Path) -> str:
    """SHA-256 over the relative path and bytes of every .py file of the package."""
    digest = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        digest.update(str(path.relative_to(package_dir)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def outdate_all_if_package_changed(app: Sphinx, env, added, changed, removed) -> list[str]:
    cache_dir = Path(env.mystnb_config.execution_cache_path)
    stored = cache_dir / FINGERPRINT_FILE
    current = package_fingerprint(Path(app.srcdir).parent / "mini_llm")
    if stored.exists() and stored.read_text() == current:
        return []
    if cache_dir.exists():
        LOGGER.info("mini_llm changed since the last build: re-executing every chapter")
        shutil.rmtree(cache_dir)
    cache_dir.mkdir(parents=True)
    stored.write_text(current)
    return sorted(env.found_docs)


def setup(app: Sphinx) -> dict:
    app.connect("env-get-outdated", outdate_all_if_package_changed)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
