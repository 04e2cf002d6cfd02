"""The Python `kubernetes` client against a server: CRUD, patch, watch, custom objects.

Usage: python3 client_test.py <kubeconfig> <namespace>. Exits non-zero on the first failed check.
Identical on a real server (with the Widget CRD of tests/common installed).
"""
import sys
import threading
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException


def main(kubeconfig, ns):
    config.load_kube_config(config_file=kubeconfig)
    v1 = client.CoreV1Api()

    # CRUD
    cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py", labels={"app": "py"}), data={"a": "1"})
    created = v1.create_namespaced_config_map(ns, cm)
    assert created.metadata.uid, created
    got = v1.read_namespaced_config_map("py", ns)
    assert got.data == {"a": "1"}, got.data
    got.data["b"] = "2"
    replaced = v1.replace_namespaced_config_map("py", ns, got)
    assert replaced.data == {"a": "1", "b": "2"}
    try:
        v1.create_namespaced_config_map(ns, cm)
        raise AssertionError("duplicate create succeeded")
    except ApiException as e:
        assert e.status == 409, e

    # patch: strategic merge (the client's default for a dict body) and JSON patch
    patched = v1.patch_namespaced_config_map("py", ns, {"data": {"a": None, "c": "3"}})
    assert patched.data == {"b": "2", "c": "3"}, patched.data
    patched = v1.patch_namespaced_config_map("py", ns, [{"op": "add", "path": "/data/d", "value": "4"}])
    assert patched.data["d"] == "4"

    # list with selectors
    items = v1.list_namespaced_config_map(ns, label_selector="app=py").items
    assert [i.metadata.name for i in items] == ["py"]
    assert v1.list_namespaced_config_map(ns, label_selector="app!=py").items == []

    # watch: events from a resourceVersion
    rv = v1.list_namespaced_config_map(ns).metadata.resource_version
    seen = []

    def watcher():
        w = watch.Watch()
        for ev in w.stream(v1.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=5):
            seen.append((ev["type"], ev["object"].metadata.name))
            if ev["type"] == "DELETED":
                w.stop()

    t = threading.Thread(target=watcher)
    t.start()
    time.sleep(0.5)
    v1.patch_namespaced_config_map("py", ns, {"data": {"e": "5"}})
    v1.delete_namespaced_config_map("py", ns)
    t.join(timeout=10)
    assert seen == [("MODIFIED", "py"), ("DELETED", "py")], seen
    try:
        v1.read_namespaced_config_map("py", ns)
        raise AssertionError("deleted object still readable")
    except ApiException as e:
        assert e.status == 404

    # custom objects
    co = client.CustomObjectsApi()
    body = {"apiVersion": "test.strata.dev/v1", "kind": "Widget", "metadata": {"name": "pyw"}, "spec": {"size": 2}}
    w = co.create_namespaced_custom_object("test.strata.dev", "v1", ns, "widgets", body)
    assert w["spec"]["color"] == "red", w
    w = co.patch_namespaced_custom_object("test.strata.dev", "v1", ns, "widgets", "pyw", {"spec": {"size": 3}})
    assert w["metadata"]["generation"] == 2, w
    s = co.patch_namespaced_custom_object_status("test.strata.dev", "v1", ns, "widgets", "pyw", {"status": {"phase": "Up"}})
    assert s["status"]["phase"] == "Up"
    try:
        co.create_namespaced_custom_object("test.strata.dev", "v1", ns, "widgets",
                                           {"apiVersion": "test.strata.dev/v1", "kind": "Widget", "metadata": {"name": "bad"}, "spec": {"size": 0}})
        raise AssertionError("invalid widget accepted")
    except ApiException as e:
        assert e.status == 422 and "spec.size" in e.body, e.body
    co.delete_namespaced_custom_object("test.strata.dev", "v1", ns, "widgets", "pyw")
    assert co.list_namespaced_custom_object("test.strata.dev", "v1", ns, "widgets")["items"] == []
    print("python client: all checks passed")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
