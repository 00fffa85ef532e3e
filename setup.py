"""The one build step pyproject.toml cannot declare stably: the fingerprints' C
extension (trawler/_fingerprint.c, and the SimHash index's lookup in
trawler/_simhash_near.c). ``optional``: without a C compiler or zlib's headers pip
warns and installs the package anyway, and simhash.py and simhash_index.py compute
the same values in numpy. (setuptools' ``[tool.setuptools.ext-modules]`` table does
the same, but is marked experimental and warns on every build.)"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "trawler._fingerprint",
            sources=["trawler/_fingerprint.c", "trawler/_simhash_near.c"],
            depends=["trawler/_growable.h"],
            libraries=["z"],
            optional=True,
        )
    ]
)
