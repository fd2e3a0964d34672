"""The results cache's diskcache ``Disk``: JSON text only, stored inline, never unpickled.

Its own module so that the cache (:mod:`privcore.engine.cache`) and the probe of a cache folder
(:mod:`privcore.engine.cache_faults`, which builds a fresh database to compare schemas) both import it
without importing each other. Built lazily: importing this module does not import diskcache.
"""

from __future__ import annotations

__all__ = ["MAX_VALUE_CHARS", "json_disk"]

#: A stored result is a few hundred characters; anything far larger is not ours.
MAX_VALUE_CHARS = 1_000_000


def _json_disk_class():  # noqa: ANN202 - built lazily so that importing this module stays cheap
    import diskcache
    from diskcache.core import MODE_RAW

    class JSONOnlyDisk(diskcache.Disk):
        """A diskcache ``Disk`` for str keys and str (JSON text) values, always stored inline.

        ``store`` refuses anything but a str; ``fetch`` returns the stored text for inline text
        rows and None for anything else (pickles, file references, blobs): it never calls pickle
        and never opens a file. ``get`` never unpickles a key.
        """

        def put(self, key: object) -> tuple[str, bool]:
            if type(key) is not str:
                raise TypeError(f"cache keys must be str, got {type(key).__name__}")
            return key, True

        def get(self, key: object, raw: bool) -> str:
            return key if (raw and isinstance(key, str)) else "<unreadable key>"

        def store(self, value: object, read: bool, key: object = None) -> tuple[int, int, None, str]:
            if read or type(value) is not str:
                raise TypeError(f"cache values must be JSON text (str), got {type(value).__name__}")
            if len(value) > MAX_VALUE_CHARS:
                raise ValueError(f"cache value of {len(value)} characters exceeds {MAX_VALUE_CHARS}")
            return 0, MODE_RAW, None, value

        def fetch(self, mode: int, filename: str | None, value: object, read: bool) -> str:
            if read or mode != MODE_RAW or filename is not None or not isinstance(value, str):
                return ""  # not ours: reported as a bad value by ResultCache.get
            return value

        def filename(self, key: object = None, value: object = None) -> tuple[str, str]:  # never used: values are inline
            raise TypeError("JSONOnlyDisk stores values inline only")

        def remove(self, file_path: str) -> None:  # never delete a file a row names
            return None

    return JSONOnlyDisk


_DISK_CLASS = None


def json_disk():  # noqa: ANN201
    """The ``JSONOnlyDisk`` class (made on first use)."""
    global _DISK_CLASS
    if _DISK_CLASS is None:
        _DISK_CLASS = _json_disk_class()
    return _DISK_CLASS
