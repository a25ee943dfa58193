#!/usr/bin/env python3
"""Checks Kubernetes manifests against the Kubernetes API's schemas, offline.

helm is not a Debian package, and kubectl (Debian's kubernetes-client) needs an API server
even for `apply --dry-run=client`. Debian's python3-kubernetes (22.6, the API of Kubernetes
1.22) carries the model classes generated from the Kubernetes OpenAPI spec: for each type
its fields (`attribute_map`: Python name to JSON name), their types (`openapi_types`) and,
in each field's setter, whether the field is required. This walks every document of every
file against the model of its apiVersion and kind, and reports, naming the file, the line,
the document (kind and name) and the field's path:

  - a field the model does not have (a misspelt key);
  - a value of the wrong type: string, integer, boolean, number, a map, a list, an object
    of a model; IntOrString fields (a port, maxUnavailable: the table INT_OR_STRING) an
    integer or a string; resource quantities (`resources.limits`, `resources.requests`,
    `emptyDir.sizeLimit`) a string or a number, as the API server takes them; the few
    free-form `object` fields anything;
  - a required field that is missing (or null);
  - a document without apiVersion, kind or metadata.name, a kind the API does not have,
    a namespace on a cluster-scoped kind, and a key given twice in one map.

The kinds and their scope come from the package's API classes: each `create_*` method
takes a model (`:param V1Deployment body:`) and posts it to a path
(`/apis/apps/v1/namespaces/{namespace}/deployments`).

Custom resources are not in that package. The ServiceMonitor (monitoring.coreos.com/v1,
the Prometheus operator's) is checked against a subset of its CRD written below
(SERVICE_MONITOR): the fields this project's chart may use, with their CRD types; a field
outside the subset is reported as such, so that adding one means adding it here.
Not checked: value formats (DNS names, quantities' syntax, enums), cross-field rules
(a selector matching the template's labels), anything only the API server knows.

  python3 check_schema.py FILE...     exit 0: all valid; 1: errors (printed); 77: the
                                      packages are missing (1 with CI=true)
  python3 check_schema.py --expect FILE...   exit 0 when each file's errors are exactly
                                      its `# expect: LINE: ...` comments (the negative test)
"""

import inspect
import os
import re
import sys

try:
    import yaml
    from kubernetes.client import api as k8s_api
    from kubernetes.client import models as k8s_models
except ImportError as err:  # the test's skip, or a failure in CI
    print(f"check_schema.py: {err} (Debian packages python3-kubernetes and python3-yaml)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") in ("true", "1") else 77)

# Fields whose model type is `str` or `dict(str, str)` but which hold a resource.Quantity,
# which the API server also takes as a number.
QUANTITIES = {("V1ResourceRequirements", "limits"), ("V1ResourceRequirements", "requests"),
              ("V1EmptyDirVolumeSource", "sizeLimit")}
# The IntOrString fields (the OpenAPI spec's int-or-string, typed `object` by the
# generator like the truly free-form ones): an integer or a string.
INT_OR_STRING = {("V1HTTPGetAction", "port"), ("V1TCPSocketAction", "port"), ("V1ServicePort", "targetPort"),
                 ("V1NetworkPolicyPort", "port"), ("V1RollingUpdateDeployment", "maxSurge"),
                 ("V1RollingUpdateDeployment", "maxUnavailable"), ("V1RollingUpdateDaemonSet", "maxSurge"),
                 ("V1RollingUpdateDaemonSet", "maxUnavailable"), ("V1PodDisruptionBudgetSpec", "minAvailable"),
                 ("V1PodDisruptionBudgetSpec", "maxUnavailable"), ("MonitoringV1Endpoint", "targetPort")}


class Model:
    """A type's fields: JSON name to type string (the generator's grammar: str, int, bool,
    float, object, datetime, list[T], dict(str, T), or a model's name), and the required
    ones."""

    def __init__(self, name, fields, required):
        self.name = name
        self.fields = fields
        self.required = required


def _required(cls, attr):
    setter = getattr(cls, attr).fset
    return "must not be `None`" in inspect.getsource(setter)


_models = {}


def model(name):
    """The Model of a generated class (V1Deployment) or of the CRD subset below."""
    if name in _models:
        return _models[name]
    if name in CRD_MODELS:
        fields, required = CRD_MODELS[name]
        _models[name] = Model(name, fields, set(required))
        return _models[name]
    cls = getattr(k8s_models, name)
    fields = {cls.attribute_map[a]: t for a, t in cls.openapi_types.items()}
    required = {cls.attribute_map[a] for a in cls.openapi_types if _required(cls, a)}
    _models[name] = Model(name, fields, required)
    return _models[name]


def api_kinds():
    """(apiVersion, kind) -> (model name, namespaced), from the API classes' create methods."""
    kinds = {}
    for _, cls in inspect.getmembers(k8s_api, inspect.isclass):
        for method_name, method in inspect.getmembers(cls, inspect.isfunction):
            if not (method_name.startswith("create_") and method_name.endswith("_with_http_info")):
                continue
            source = inspect.getsource(method)
            body = re.search(r":param (\w+) body:", source)
            post = re.search(r"'(/apis?/[^']+)', 'POST'", source)
            kind = re.search(r"create an? (\w+)", source)
            if not (body and post and kind) or "{name}" in post.group(1):
                continue  # a subresource (eviction, binding, token request)
            parts = post.group(1).split("/")
            api_version = parts[2] if parts[1] == "api" else f"{parts[2]}/{parts[3]}"
            kinds[(api_version, kind.group(1))] = (body.group(1), "{namespace}" in post.group(1))
    return kinds


# ---- the ServiceMonitor, a subset of prometheus-operator's CRD (monitoring.coreos.com/v1) ----
# The fields of ServiceMonitorSpec, Endpoint, NamespaceSelector and RelabelConfig this chart
# may use, with their CRD types; the CRD's required fields (spec; spec.selector).
SERVICE_MONITOR = "monitoring.coreos.com/v1", "ServiceMonitor"
CRD_MODELS = {
    "MonitoringV1ServiceMonitor": (
        {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta", "spec": "MonitoringV1ServiceMonitorSpec"},
        ["spec"]),
    "MonitoringV1ServiceMonitorSpec": (
        {"selector": "V1LabelSelector", "endpoints": "list[MonitoringV1Endpoint]",
         "namespaceSelector": "MonitoringV1NamespaceSelector", "jobLabel": "str", "targetLabels": "list[str]",
         "podTargetLabels": "list[str]", "sampleLimit": "int", "targetLimit": "int", "labelLimit": "int"},
        ["selector"]),
    "MonitoringV1Endpoint": (
        {"port": "str", "targetPort": "object", "path": "str", "scheme": "str", "params": "dict(str, list[str])",
         "interval": "str", "scrapeTimeout": "str", "honorLabels": "bool", "honorTimestamps": "bool",
         "followRedirects": "bool", "enableHttp2": "bool", "relabelings": "list[MonitoringV1RelabelConfig]",
         "metricRelabelings": "list[MonitoringV1RelabelConfig]"},
        []),
    "MonitoringV1NamespaceSelector": ({"any": "bool", "matchNames": "list[str]"}, []),
    "MonitoringV1RelabelConfig": (
        {"sourceLabels": "list[str]", "separator": "str", "targetLabel": "str", "regex": "str", "modulus": "int",
         "replacement": "str", "action": "str"},
        []),
}

# ---- YAML nodes, with their lines ----
STR, INT, FLOAT, BOOL, NULL, TIMESTAMP = (f"tag:yaml.org,2002:{t}" for t in
                                          ("str", "int", "float", "bool", "null", "timestamp"))


def describe(node):
    if isinstance(node, yaml.MappingNode):
        return "a map"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return {STR: "a string", INT: "an integer", FLOAT: "a number", BOOL: "a boolean", NULL: "null",
            TIMESTAMP: "a timestamp"}.get(node.tag, node.tag)


class Checker:
    def __init__(self):
        self.kinds = api_kinds()
        self.errors = []

    def error(self, where, node, path, message):
        line = node.start_mark.line + 1 if node is not None else 0
        self.errors.append(f"{where[0]}:{line}: {where[1]}: {path or '(document)'}: {message}")

    def pairs(self, where, node, path):
        """The map's (key, value) nodes; a key given twice is an error."""
        seen = set()
        for key, value in node.value:
            if key.value in seen:
                self.error(where, key, join(path, key.value), "given twice in one map")
            seen.add(key.value)
            yield key.value, value

    def value(self, where, node, type_name, path, owner=None, field=None, key_node=None):
        if node.tag == NULL:
            return  # null is absent; required fields are checked by their owner
        quantity = (owner, field) in QUANTITIES
        list_of = re.fullmatch(r"list\[(.+)\]", type_name)
        dict_of = re.fullmatch(r"dict\(str, (.+)\)", type_name)
        if type_name == "object":
            if (owner, field) in INT_OR_STRING and not (isinstance(node, yaml.ScalarNode) and node.tag in (INT, STR)):
                self.error(where, node, path, f"want an integer or a string, found {describe(node)}")
            return
        if list_of:
            if not isinstance(node, yaml.SequenceNode):
                return self.error(where, node, path, f"want a list, found {describe(node)}")
            for i, item in enumerate(node.value):
                self.value(where, item, list_of.group(1), f"{path}[{i}]")
        elif dict_of:
            if not isinstance(node, yaml.MappingNode):
                return self.error(where, node, path, f"want a map, found {describe(node)}")
            for key, item in self.pairs(where, node, path):
                item_type = dict_of.group(1)
                if quantity and item.tag in (INT, FLOAT):
                    continue
                self.value(where, item, item_type, join(path, key))
        elif type_name in ("str", "int", "bool", "float", "datetime", "date"):
            wanted = {"str": ({STR}, "a string"), "int": ({INT}, "an integer"), "bool": ({BOOL}, "a boolean"),
                      "float": ({INT, FLOAT}, "a number"), "datetime": ({STR, TIMESTAMP}, "a time"),
                      "date": ({STR, TIMESTAMP}, "a date")}[type_name]
            tags = wanted[0] | ({INT, FLOAT} if quantity else set())
            if not isinstance(node, yaml.ScalarNode) or node.tag not in tags:
                self.error(where, node, path, f"want {wanted[1]}, found {describe(node)}")
        else:
            self.object(where, node, model(type_name), path, key_node)

    def object(self, where, node, m, path, key_node=None):
        """`key_node`: the key this map is the value of, where a missing field is reported."""
        if not isinstance(node, yaml.MappingNode):
            return self.error(where, node, path, f"want a map ({m.name}), found {describe(node)}")
        present = set()
        keys = {k.value: k for k, _ in node.value}
        for key, value in self.pairs(where, node, path):
            if key not in m.fields:
                subset = " (checked against a subset of the CRD: check_schema.py)" if m.name in CRD_MODELS else ""
                self.error(where, keys[key], join(path, key), f"unknown field in {m.name}{subset}")
                continue
            if value.tag != NULL:
                present.add(key)
            self.value(where, value, m.fields[key], join(path, key), m.name, key, keys[key])
        for key in sorted(m.required - present):
            self.error(where, key_node or node, join(path, key), f"required field of {m.name} is missing")

    def document(self, file, index, node):
        fields = {key.value: value for key, value in node.value} if isinstance(node, yaml.MappingNode) else {}
        scalar = lambda k: fields[k].value if k in fields and isinstance(fields[k], yaml.ScalarNode) else None
        metadata = fields.get("metadata")
        meta = {k.value: v for k, v in metadata.value} if isinstance(metadata, yaml.MappingNode) else {}
        name = meta["name"].value if isinstance(meta.get("name"), yaml.ScalarNode) else None
        where = (file, f"document {index} ({scalar('kind') or '?'} {name or '?'})")
        if not isinstance(node, yaml.MappingNode):
            return self.error(where, node, "", f"want a map, found {describe(node)}")
        for key in ("apiVersion", "kind"):
            if not scalar(key):
                return self.error(where, node, key, "missing")
        if not name:
            metadata_key = next((k for k, _ in node.value if k.value == "metadata"), node)
            self.error(where, metadata_key, "metadata.name", "missing")
        api_version, kind = scalar("apiVersion"), scalar("kind")
        if (api_version, kind) == SERVICE_MONITOR:
            model_name, namespaced = "MonitoringV1ServiceMonitor", True
        elif (api_version, kind) in self.kinds:
            model_name, namespaced = self.kinds[(api_version, kind)]
        else:
            return self.error(where, fields["kind"], "kind",
                              f"{api_version} {kind}: not a kind of the Kubernetes API nor the ServiceMonitor")
        if not namespaced and "namespace" in meta:
            self.error(where, meta["namespace"], "metadata.namespace", f"{kind} is cluster-scoped: no namespace")
        self.object(where, node, model(model_name), "")

    def file(self, path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        except yaml.YAMLError as err:
            self.errors.append(f"{path}: {err}")
            return 0
        index = 0
        for node in nodes:
            if node is None:
                continue  # an empty document (comments only)
            index += 1
            self.document(path, index, node)
        return index


def join(path, key):
    return f"{path}.{key}" if path else key


def k8s_version():
    import kubernetes
    return kubernetes.__version__


def expect(path):
    """Checks `path` and compares its errors with its `# expect: LINE: ...` comments."""
    with open(path, encoding="utf-8") as f:
        expected = re.findall(r"^# expect: (.+)$", f.read(), re.M)
    if not expected:
        print(f"{path}: no `# expect:` lines", file=sys.stderr)
        return 1
    checker = Checker()
    checker.file(path)
    found = [e[len(path) + 1:].strip() if e.startswith(path + ":") else e for e in checker.errors]
    missing = [e for e in expected if e not in found]
    unexpected = [e for e in found if e not in expected]
    for e in missing:
        print(f"{path}: expected, not reported: {e}")
    for e in unexpected:
        print(f"{path}: reported, not expected: {e}")
    if missing or unexpected:
        return 1
    print(f"{path}: the {len(expected)} expected errors, and no other")
    return 0


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "--expect":
        return max(expect(path) for path in argv[1:]) if argv[1:] else 2
    checker = Checker()
    counts = [(path, checker.file(path)) for path in argv]
    for e in checker.errors:
        print(e)
    if checker.errors:
        return 1
    for path, n in counts:
        print(f"{path}: {n} documents valid (Kubernetes API of python3-kubernetes {k8s_version()})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
