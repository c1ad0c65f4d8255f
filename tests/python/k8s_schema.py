"""The subset of the Kubernetes and JobSet schemas that examples/kubernetes/*.yaml use,
for tests/python/k8s_manifest_test.py (not a test itself).

Field names, types, enums and required fields as the APIs define them: JobSet v1alpha2
(kubernetes-sigs/jobset v0.12.0, api/jobset/v1alpha2/jobset_types.go: json tags, kubebuilder
enums), batch/v1 Job, apps/v1 Deployment, core/v1 Pod, Service and PersistentVolumeClaim,
networking.k8s.io/v1 NetworkPolicy (the Kubernetes API reference), and KEDA's
keda.sh/v1alpha1 ScaledObject (keda.sh/docs, "ScaledObject specification": its trigger
metadata is a map of strings). check() fails an unknown field, as
`kubectl apply --validate=strict` would.

A type is str, int, bool, a set of allowed strings, a list [type], a dict of fields
(required ones marked with a trailing "!", "*" for any key), QUANTITY (a Kubernetes
quantity) or INT_OR_STR."""

QUANTITY = "quantity"
INT_OR_STR = "int-or-string"

OBJECT_META = {"name!": str, "namespace": str, "labels": {"*": str}, "annotations": {"*": str}}
TEMPLATE_META = {"labels": {"*": str}, "annotations": {"*": str}}
LABEL_SELECTOR = {
    "matchLabels": {"*": str},
    "matchExpressions": [{"key!": str, "operator!": {"In", "NotIn", "Exists", "DoesNotExist"}, "values": [str]}],
}
ENV_VAR = {
    "name!": str,
    "value": str,
    "valueFrom": {
        "fieldRef": {"fieldPath!": str, "apiVersion": str},
        "secretKeyRef": {"name!": str, "key!": str, "optional": bool},
        "configMapKeyRef": {"name!": str, "key!": str, "optional": bool},
    },
}
PROBE = {
    "grpc": {"port!": int, "service": str},
    "tcpSocket": {"port!": INT_OR_STR, "host": str},
    "httpGet": {"port!": INT_OR_STR, "path": str, "host": str, "scheme": {"HTTP", "HTTPS"}},
    "exec": {"command": [str]},
    "initialDelaySeconds": int, "periodSeconds": int, "timeoutSeconds": int,
    "successThreshold": int, "failureThreshold": int, "terminationGracePeriodSeconds": int,
}
SECCOMP = {"type!": {"RuntimeDefault", "Localhost", "Unconfined"}, "localhostProfile": str}
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": bool, "readOnlyRootFilesystem": bool, "privileged": bool,
    "runAsNonRoot": bool, "runAsUser": int, "runAsGroup": int,
    "capabilities": {"add": [str], "drop": [str]}, "seccompProfile": SECCOMP,
}
POD_SECURITY = {
    "runAsNonRoot": bool, "runAsUser": int, "runAsGroup": int, "fsGroup": int,
    "fsGroupChangePolicy": {"OnRootMismatch", "Always"}, "supplementalGroups": [int], "seccompProfile": SECCOMP,
}
CONTAINER = {
    "name!": str, "image!": str, "imagePullPolicy": {"Always", "IfNotPresent", "Never"},
    "command": [str], "args": [str], "workingDir": str,
    "ports": [{"containerPort!": int, "name": str, "protocol": {"TCP", "UDP", "SCTP"}}],
    "env": [ENV_VAR],
    "resources": {"requests": {"*": QUANTITY}, "limits": {"*": QUANTITY}},
    "volumeMounts": [{"name!": str, "mountPath!": str, "readOnly": bool, "subPath": str}],
    "readinessProbe": PROBE, "livenessProbe": PROBE, "startupProbe": PROBE,
    "securityContext": CONTAINER_SECURITY,
    "terminationMessagePath": str, "terminationMessagePolicy": {"File", "FallbackToLogsOnError"},
}
NODE_SELECTOR_REQUIREMENT = {"key!": str, "operator!": {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"},
                             "values": [str]}
NODE_SELECTOR_TERM = {"matchExpressions": [NODE_SELECTOR_REQUIREMENT], "matchFields": [NODE_SELECTOR_REQUIREMENT]}
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms!": [NODE_SELECTOR_TERM]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight!": int, "preference!": NODE_SELECTOR_TERM}],
    },
}
POD_SPEC = {
    "restartPolicy": {"OnFailure", "Never"},  # Jobs refuse Always
    "containers!": [CONTAINER],
    "volumes": [{"name!": str, "emptyDir": {"medium": {"", "Memory"}, "sizeLimit": QUANTITY},
                 "persistentVolumeClaim": {"claimName!": str, "readOnly": bool},
                 "secret": {"secretName!": str}}],
    "nodeSelector": {"*": str},
    "affinity": AFFINITY,
    "tolerations": [{"key": str, "operator": {"Exists", "Equal"}, "value": str,
                     "effect": {"NoSchedule", "PreferNoSchedule", "NoExecute"}, "tolerationSeconds": int}],
    "securityContext": POD_SECURITY,
    "serviceAccountName": str,
    "automountServiceAccountToken": bool,
    "terminationGracePeriodSeconds": int,
}
POD_FAILURE_POLICY = {
    "rules!": [{
        "action!": {"FailJob", "FailIndex", "Ignore", "Count"},
        "onExitCodes": {"containerName": str, "operator!": {"In", "NotIn"}, "values!": [int]},
        "onPodConditions": [{"type!": str, "status!": {"True", "False", "Unknown"}}],
    }],
}
JOB_SPEC = {
    "completionMode": {"NonIndexed", "Indexed"},
    "parallelism": int, "completions": int, "backoffLimit": int, "activeDeadlineSeconds": int,
    "backoffLimitPerIndex": int, "maxFailedIndexes": int, "ttlSecondsAfterFinished": int,
    "podReplacementPolicy": {"TerminatingOrFailed", "Failed"},
    "podFailurePolicy": POD_FAILURE_POLICY,
    "template!": {"metadata": TEMPLATE_META, "spec!": POD_SPEC},
}
JOBSET = {
    "apiVersion!": {"jobset.x-k8s.io/v1alpha2"},
    "kind!": {"JobSet"},
    "metadata!": OBJECT_META,
    "spec!": {
        "network": {"enableDNSHostnames": bool, "subdomain": str, "publishNotReadyAddresses": bool},
        "successPolicy": {"operator!": {"All", "Any"}, "targetReplicatedJobs": [str]},
        "failurePolicy": {
            "maxRestarts": int,
            "restartStrategy": {"Recreate", "BlockingRecreate", "InPlaceRestart"},
            "rules": [{
                "name!": str,
                "action!": {"FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts",
                            "RestartJob", "RestartJobAndIgnoreMaxRestarts"},
                "onJobFailureReasons": [str], "onJobFailureMessagePatterns": [str], "targetReplicatedJobs": [str],
            }],
        },
        "startupPolicy": {"startupPolicyOrder!": {"AnyOrder", "InOrder"}},
        "suspend": bool,
        "ttlSecondsAfterFinished": int,
        "replicatedJobs!": [{"name!": str, "replicas": int,
                             "template!": {"metadata": TEMPLATE_META, "spec!": JOB_SPEC}}],
    },
}
PERSISTENT_VOLUME_CLAIM = {
    "apiVersion!": {"v1"},
    "kind!": {"PersistentVolumeClaim"},
    "metadata!": OBJECT_META,
    "spec!": {
        "accessModes!": [{"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}],
        "resources!": {"requests!": {"storage!": QUANTITY}, "limits": {"storage": QUANTITY}},
        "storageClassName": str,
        "volumeMode": {"Filesystem", "Block"},
        "volumeName": str,
        "selector": LABEL_SELECTOR,
    },
}
NETWORK_POLICY_PEER = {"podSelector": LABEL_SELECTOR, "namespaceSelector": LABEL_SELECTOR,
                       "ipBlock": {"cidr!": str, "except": [str]}}
NETWORK_POLICY_PORT = {"protocol": {"TCP", "UDP", "SCTP"}, "port": INT_OR_STR, "endPort": int}
NETWORK_POLICY = {
    "apiVersion!": {"networking.k8s.io/v1"},
    "kind!": {"NetworkPolicy"},
    "metadata!": OBJECT_META,
    "spec!": {
        "podSelector!": LABEL_SELECTOR,
        "policyTypes": [{"Ingress", "Egress"}],
        "ingress": [{"from": [NETWORK_POLICY_PEER], "ports": [NETWORK_POLICY_PORT]}],
        "egress": [{"to": [NETWORK_POLICY_PEER], "ports": [NETWORK_POLICY_PORT]}],
    },
}
JOB = {"apiVersion!": {"batch/v1"}, "kind!": {"Job"}, "metadata!": OBJECT_META, "spec!": JOB_SPEC}
DEPLOYMENT = {
    "apiVersion!": {"apps/v1"},
    "kind!": {"Deployment"},
    "metadata!": OBJECT_META,
    "spec!": {
        "replicas": int, "minReadySeconds": int, "revisionHistoryLimit": int, "progressDeadlineSeconds": int,
        "paused": bool,
        "selector!": LABEL_SELECTOR,
        "strategy": {"type": {"RollingUpdate", "Recreate"},
                     "rollingUpdate": {"maxSurge": INT_OR_STR, "maxUnavailable": INT_OR_STR}},
        "template!": {"metadata": TEMPLATE_META, "spec!": {**POD_SPEC, "restartPolicy": {"Always"}}},  # Always only
    },
}
SERVICE = {
    "apiVersion!": {"v1"},
    "kind!": {"Service"},
    "metadata!": OBJECT_META,
    "spec!": {
        "type": {"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"},
        "clusterIP": str, "selector": {"*": str}, "publishNotReadyAddresses": bool,
        "ports": [{"name": str, "port!": int, "targetPort": INT_OR_STR, "protocol": {"TCP", "UDP", "SCTP"},
                   "appProtocol": str}],
    },
}
HPA_SCALING_RULES = {
    "stabilizationWindowSeconds": int, "selectPolicy": {"Max", "Min", "Disabled"},
    "policies": [{"type!": {"Pods", "Percent"}, "value!": int, "periodSeconds!": int}],
}
SCALED_OBJECT = {
    "apiVersion!": {"keda.sh/v1alpha1"},
    "kind!": {"ScaledObject"},
    "metadata!": OBJECT_META,
    "spec!": {
        "scaleTargetRef!": {"name!": str, "apiVersion": str, "kind": str, "envSourceContainerName": str},
        "pollingInterval": int, "cooldownPeriod": int, "initialCooldownPeriod": int,
        "idleReplicaCount": int, "minReplicaCount": int, "maxReplicaCount": int,
        "fallback": {"failureThreshold!": int, "replicas!": int},
        "advanced": {
            "restoreToOriginalReplicaCount": bool,
            "horizontalPodAutoscalerConfig": {"name": str, "behavior": {"scaleUp": HPA_SCALING_RULES,
                                                                        "scaleDown": HPA_SCALING_RULES}},
            "scalingModifiers": {"target!": str, "formula!": str, "activationTarget": str,
                                 "metricType": {"AverageValue", "Value"}},
        },
        "triggers!": [{
            "type!": str, "metadata!": {"*": str}, "name": str, "useCachedMetrics": bool,
            "authenticationRef": {"name!": str, "kind": {"TriggerAuthentication", "ClusterTriggerAuthentication"}},
            "metricType": {"AverageValue", "Value", "Utilization"},
        }],
    },
}
BY_KIND = {"JobSet": JOBSET, "PersistentVolumeClaim": PERSISTENT_VOLUME_CLAIM, "NetworkPolicy": NETWORK_POLICY,
           "Job": JOB, "Deployment": DEPLOYMENT, "Service": SERVICE, "ScaledObject": SCALED_OBJECT}


def is_quantity(v):
    if isinstance(v, int) and not isinstance(v, bool):
        return True
    if not isinstance(v, str) or not v:
        return False
    for suffix in ("Ki", "Mi", "Gi", "Ti", "m", "k", "M", "G", "T", ""):
        if v.endswith(suffix):
            number = v[: len(v) - len(suffix)] if suffix else v
            try:
                return float(number) >= 0
            except ValueError:
                continue
    return False


def check(value, schema, where, errors):
    """Appends to `errors` every way `value` departs from `schema`."""
    if schema is str or schema is int or schema is bool:
        ok = isinstance(value, schema) and not (schema is int and isinstance(value, bool))
        if not ok:
            errors.append(f"{where}: expected {schema.__name__}, got {type(value).__name__} {value!r}")
    elif schema == QUANTITY:
        if not is_quantity(value):
            errors.append(f"{where}: {value!r} is not a Kubernetes quantity")
    elif schema == INT_OR_STR:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            errors.append(f"{where}: expected an int or a string, got {type(value).__name__} {value!r}")
    elif isinstance(schema, set):
        if value not in schema:
            errors.append(f"{where}: {value!r} is not one of {sorted(schema)}")
    elif isinstance(schema, list):
        if not isinstance(value, list):
            errors.append(f"{where}: expected a list, got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            check(item, schema[0], f"{where}[{i}]", errors)
    elif isinstance(schema, dict):
        check_fields(value, schema, where, errors)
    else:
        raise AssertionError(f"bad schema at {where}")


def check_fields(value, schema, where, errors):
    if not isinstance(value, dict):
        errors.append(f"{where}: expected an object, got {type(value).__name__}")
        return
    fields = {k.rstrip("!"): s for k, s in schema.items()}
    for k in schema:
        if k.endswith("!") and k[:-1] not in value:
            errors.append(f"{where}: required field {k[:-1]!r} is missing")
    for k, v in value.items():
        if k in fields:
            check(v, fields[k], f"{where}.{k}", errors)
        elif "*" in fields:
            check(v, fields["*"], f"{where}.{k}", errors)
        else:
            errors.append(f"{where}: unknown field {k!r}")


def check_documents(docs):
    """Schema errors of a manifest's documents, each checked by its kind."""
    errors = []
    for i, doc in enumerate(docs):
        kind = doc.get("kind") if isinstance(doc, dict) else None
        if kind not in BY_KIND:
            errors.append(f"document {i}: kind {kind!r} is not one of {sorted(BY_KIND)}")
            continue
        check(doc, BY_KIND[kind], f"{kind}[{doc.get('metadata', {}).get('name')}]", errors)
    return errors
