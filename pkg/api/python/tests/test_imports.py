"""Every generated module imports with only grpcio and protobuf installed: nothing the protos
import (google/protobuf well-known types) is missing from the package's dependencies."""

import importlib
import pathlib
import unittest

import vigil


class ImportsTest(unittest.TestCase):
    def test_every_generated_module_imports(self):
        names = []
        for root in vigil.__path__:
            for f in sorted(pathlib.Path(root).rglob("*_pb2*.py")):
                rel = f.relative_to(pathlib.Path(root).parent).with_suffix("")
                names.append(".".join(rel.parts))
        self.assertGreaterEqual(len(names), 12, names)  # 6 domains, messages and stubs
        for name in names:
            with self.subTest(module=name):
                importlib.import_module(name)

    def test_services_have_stubs(self):
        for domain, stub in [("reservations", "ReservationServiceStub"), ("locks", "LockServiceStub"),
                             ("chat", "ChatServiceStub"), ("lobby", "LobbyServiceStub"),
                             ("room", "RoomServiceStub"), ("admin", "AlarmAdminServiceStub")]:
            with self.subTest(domain=domain):
                mod = importlib.import_module(f"vigil.{domain}.v1.{domain}_pb2_grpc")
                self.assertTrue(callable(getattr(mod, stub)))

    def test_helpers_import_and_document_every_public_name(self):
        import inspect

        for name in ["vigil.errors", "vigil.lockclient", "vigil.reservationclient", "vigil.chatclient"]:
            mod = importlib.import_module(name)
            self.assertTrue(mod.__doc__, name)
            for attr in mod.__all__:
                obj = getattr(mod, attr)
                with self.subTest(name=f"{name}.{attr}"):
                    if inspect.isclass(obj) or inspect.isfunction(obj):
                        self.assertTrue(obj.__doc__, "no docstring")
                        for meth, fn in vars(obj).items() if inspect.isclass(obj) else []:
                            if inspect.isfunction(fn) and not meth.startswith("_"):
                                self.assertTrue(fn.__doc__, f"{meth} has no docstring")


if __name__ == "__main__":
    unittest.main(verbosity=2)
