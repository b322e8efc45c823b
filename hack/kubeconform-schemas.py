#!/usr/bin/env python3
"""Write the JSON schemas kubeconform validates our manifests against, without a network.

kubeconform downloads its schemas from GitHub by default; this machine (and CI) cannot. The
schemas are made here instead, from the same sources the real API server uses:

* built-in kinds: the OpenAPI v2 document (api/openapi-spec/swagger.json) of the pinned
  k8s.io/kubernetes module (hack/go/k8s/v1.35.4, the oldest pinned kube-apiserver), one file per
  group/version/kind, with the definitions it references embedded;
* custom resources: the openAPIV3Schema of each version of each CRD given (crds/*.yaml).

Both are made strict as kubeconform's own converters do: every object schema that lists
properties rejects others (additionalProperties: false, unless the schema says otherwise
or preserves unknown fields), and int-or-string becomes a oneOf. File names follow
kubeconform's default template, ``{{ .ResourceKind }}{{ .KindSuffix }}.json`` (e.g.
``deployment-apps-v1.json``, ``service-v1.json``, ``schedulingpolicy-metricsched-v1alpha1.json``),
so use ``-schema-location '<dir>/{{ .ResourceKind }}{{ .KindSuffix }}.json'``.

    hack/kubeconform-schemas.py OUT_DIR [--swagger FILE] [CRD.yaml ...]
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REF_PREFIX = "#/definitions/"


def kind_suffix(group: str, version: str) -> str:
    """kubeconform's KindSuffix: -<first label of the group>-<version>, or -<version>."""
    first = group.split(".", maxsplit=1)[0].lower()
    return f"-{first}-{version.lower()}" if group else f"-{version.lower()}"


# The chart is checked against the oldest pinned version it supports (helm-lint.sh's
# k8s_version, tests/unit/chart/chart_helpers.py's K8S_VERSION).
MODULE = HERE / "go" / "k8s" / "v1.35.4"


def pinned_swagger() -> Path:
    """swagger.json of the k8s.io/kubernetes module pinned in MODULE (downloads it once)."""
    cmd = ["go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes"]
    out = subprocess.run(cmd, cwd=MODULE, capture_output=True, text=True, check=False)
    directory = out.stdout.strip()
    if out.returncode != 0 or not directory or not Path(directory).is_dir():
        subprocess.run(["go", "mod", "download", "k8s.io/kubernetes"], cwd=MODULE, check=True)
        directory = subprocess.run(
            cmd, cwd=MODULE, capture_output=True, text=True, check=True
        ).stdout.strip()
    return Path(directory) / "api" / "openapi-spec" / "swagger.json"


def strict(schema: Any, *, nullable_optional: bool) -> Any:
    """A copy of schema with closed objects and int-or-string spelled out for JSON Schema."""
    if isinstance(schema, list):
        return [strict(s, nullable_optional=nullable_optional) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "definitions", "patternProperties"):
            out[key] = {k: strict(v, nullable_optional=nullable_optional) for k, v in value.items()}
        elif isinstance(value, dict | list):
            out[key] = strict(value, nullable_optional=nullable_optional)
        else:
            out[key] = value
    if out.get("format") == "int-or-string" or out.get("x-kubernetes-int-or-string"):
        kept = {k: v for k, v in out.items() if k in ("description",)}
        return {**kept, "oneOf": [{"type": "string"}, {"type": "integer"}]}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    if nullable_optional and "properties" in out:
        # Kubernetes accepts null for an optional field (omitempty); so does kubectl.
        required = set(out.get("required", []))
        for name, prop in out["properties"].items():
            if name not in required and isinstance(prop.get("type"), str):
                prop["type"] = [prop["type"], "null"]
    return out


def _refs(schema: Any) -> Iterable[str]:
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF_PREFIX):
            yield ref[len(REF_PREFIX) :]
        for value in schema.values():
            yield from _refs(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _refs(value)


def builtin_schemas(swagger: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{file name: schema} for every kind of the swagger document."""
    definitions: dict[str, Any] = swagger["definitions"]
    files: dict[str, dict[str, Any]] = {}
    for name, definition in definitions.items():
        for gvk in definition.get("x-kubernetes-group-version-kind", []):
            reachable, todo = {}, [name]
            while todo:
                current = todo.pop()
                if current in reachable:
                    continue
                reachable[current] = definitions[current]
                todo.extend(_refs(definitions[current]))
            schema = copy.deepcopy(definition)
            schema["definitions"] = {k: copy.deepcopy(v) for k, v in reachable.items()}
            schema["$schema"] = "http://json-schema.org/schema#"
            # apiVersion and kind must be this kind's (kubeconform picks the file by them).
            api_version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
            schema.setdefault("properties", {})
            schema["properties"]["apiVersion"] = {"type": "string", "enum": [api_version]}
            schema["properties"]["kind"] = {"type": "string", "enum": [gvk["kind"]]}
            fname = f"{gvk['kind'].lower()}{kind_suffix(gvk['group'], gvk['version'])}.json"
            files[fname] = strict(schema, nullable_optional=True)
    return files


def crd_schemas(paths: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """{file name: schema} for every served version of every CRD in the files."""
    files: dict[str, dict[str, Any]] = {}
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
                schema["$schema"] = "http://json-schema.org/schema#"
                props = schema.setdefault("properties", {})
                props["apiVersion"] = {
                    "type": "string",
                    "enum": [f"{spec['group']}/{version['name']}"],
                }
                props["kind"] = {"type": "string", "enum": [spec["names"]["kind"]]}
                # The API server checks metadata itself; the CRD schema leaves it open.
                props["metadata"] = {"type": "object"}
                fname = (
                    f"{spec['names']['kind'].lower()}"
                    f"{kind_suffix(spec['group'], version['name'])}.json"
                )
                files[fname] = strict(schema, nullable_optional=False)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="directory to write the schemas to")
    parser.add_argument("crds", type=Path, nargs="*", help="CRD YAML files")
    parser.add_argument("--swagger", type=Path, help="swagger.json (default: pinned module's)")
    args = parser.parse_args(argv)
    swagger_path = args.swagger or pinned_swagger()
    files = builtin_schemas(json.loads(swagger_path.read_text()))
    files.update(crd_schemas(args.crds))
    args.out.mkdir(parents=True, exist_ok=True)
    for fname, schema in files.items():
        (args.out / fname).write_text(json.dumps(schema))
    print(f"{len(files)} schemas in {args.out} (built-ins from {swagger_path})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
