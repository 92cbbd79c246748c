"""Maps the packages to their directories, the one thing pyproject.toml (which has the rest)
cannot express: `vigil` is one namespace package whose generated subpackages live under src/
(rewritten whole by `make generate`) and whose hand-written modules live under lib/vigil/."""

from setuptools import find_namespace_packages, setup

generated = find_namespace_packages("src", include=["vigil.*"])
package_dir = {pkg: "src/" + pkg.replace(".", "/") for pkg in generated}
package_dir["vigil"] = "lib/vigil"

setup(packages=["vigil", *generated], package_dir=package_dir)
