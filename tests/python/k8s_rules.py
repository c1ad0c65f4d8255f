"""What Kubernetes and the JobSet controller would make of examples/kubernetes/jobset.yaml,
for tests/python/k8s_manifest_test.py (not a test itself): the pods and their labels, the
fate of a pod that fails (the Job's podFailurePolicy, then the JobSet's failurePolicy
rules), and the checks of how the manifest's objects fit tandem and each other. Each
check returns a list of problems, so that a mutated manifest can be shown to fail."""
import re

# The pod labels the JobSet controller sets (v0.12.0, labelAndAnnotateObject), and the Job's own.
JOBSET_KEY = "jobset.sigs.k8s.io/"
JOB_FAILURE_REASONS = {"BackoffLimitExceeded", "DeadlineExceeded", "PodFailurePolicy", "FailedIndexes",
                       "MaxFailedIndexesExceeded"}
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")  # jobset_types.go, FailurePolicyRule.name
CANNOT_HELP = {2, 3, 4}  # command line, configuration, data: fail the JobSet at once
RESUMES = {75}           # SIGTERM after a checkpoint: restart, not counted
DISRUPTION = "DisruptionTarget"


def jobset_pods(jobset):
    """Every pod the JobSet makes: group, host name, labels, completion index, pod spec."""
    name, rjs = jobset["metadata"]["name"], jobset["spec"]["replicatedJobs"]
    total = sum(rj.get("replicas", 1) for rj in rjs)
    before = 0
    for rj in rjs:
        job, replicas = rj["template"]["spec"], rj.get("replicas", 1)
        for j in range(replicas):
            for p in range(job.get("parallelism", 1)):
                labels = {JOBSET_KEY + k: v for k, v in {
                    "jobset-name": name, "jobset-uid": "0b1c-uid", "replicatedjob-name": rj["name"],
                    "restart-attempt": "0", "replicatedjob-replicas": str(replicas), "global-replicas": str(total),
                    "job-index": str(j), "job-global-index": str(before + j), "job-key": "hash",
                    "group-name": "default", "group-replicas": str(total), "job-group-index": str(before + j)}.items()}
                labels.update({**rj["template"].get("metadata", {}).get("labels", {}),
                               **job["template"].get("metadata", {}).get("labels", {}),
                               "batch.kubernetes.io/job-completion-index": str(p)})
                yield {"group": rj["name"], "host": f"{name}-{rj['name']}-{j}-{p}", "labels": labels, "index": p,
                       "spec": job["template"]["spec"], "job": job}
        before += replicas


def arg(args, flag, default=None):
    return args[args.index(flag) + 1] if flag in args else default


# ---- docs/configuration.md -------------------------------------------------------------

def exit_codes(configuration_md):
    """{code: its "run it again?" cell, None in a table of two columns} from the table after
    "Exit codes" in docs/configuration.md."""
    lines = configuration_md.splitlines()
    start = next(i for i, line in enumerate(lines) if "Exit codes" in line)
    rows, seen_table = {}, False
    for line in lines[start + 1:]:
        if not line.startswith("|"):
            if seen_table:
                break
            continue
        seen_table = True
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0].isdigit():
            rows[int(cells[0])] = cells[2] if len(cells) > 2 else None
    assert rows, "docs/configuration.md: no table of exit codes after 'Exit codes'"
    return rows


def flag_default(configuration_md, flag):
    """The default of `flag` in its settings table row, off SageMaker: the last number."""
    for line in configuration_md.splitlines():
        if line.startswith(f"| `{flag}` |"):
            return float(re.findall(r"\d+", line.split("|")[2])[-1])
    raise AssertionError(f"docs/configuration.md documents no {flag}")


# ---- What happens to a pod that fails ---------------------------------------------------

def pod_rule(job, exit_code, conditions):
    """The Job controller's matchPodFailurePolicy: (action, FailJob message or None)."""
    for index, rule in enumerate(job.get("podFailurePolicy", {}).get("rules", [])):
        codes = rule.get("onExitCodes")
        if codes:
            hit = exit_code != 0 and (exit_code in codes["values"]) == (codes["operator"] == "In")
            message = f"Container {codes.get('containerName', 'tandem')} for pod ns/pod failed with exit code " \
                      f"{exit_code} matching {rule['action']} rule at index {index}"
        else:
            matched = [c["type"] for c in rule.get("onPodConditions", []) if (c["type"], c["status"]) in conditions]
            hit = bool(matched)
            message = f"Pod ns/pod has condition {matched[0] if matched else ''} matching {rule['action']} rule at index {index}"
        if hit:
            return rule["action"], message if rule["action"] == "FailJob" else None
    return "Count", None


def jobset_action(jobset, group, reason, message):
    """The JobSet controller's first matching failurePolicy rule; none: RestartJobSet."""
    for rule in jobset["spec"].get("failurePolicy", {}).get("rules", []):
        if rule.get("onJobFailureReasons") and reason not in rule["onJobFailureReasons"]:
            continue
        patterns = rule.get("onJobFailureMessagePatterns")
        if patterns and not any(re.search(p, message) for p in patterns):
            continue
        if rule.get("targetReplicatedJobs") and group not in rule["targetReplicatedJobs"]:
            continue
        return rule["action"]
    return "RestartJobSet" if jobset["spec"].get("failurePolicy") else "FailJobSet"


def fate(jobset, rj, exit_code, conditions=()):
    """What follows a pod of `rj` ending with `exit_code` (and pod `conditions`)."""
    job = rj["template"]["spec"]
    action, message = pod_rule(job, exit_code, set(conditions))
    if action == "Ignore":
        return "new pod, not counted"
    if action == "FailJob":
        return jobset_action(jobset, rj["name"], "PodFailurePolicy", message)
    if job.get("backoffLimit", 6) > 0:
        return "new pod, counted"
    return jobset_action(jobset, rj["name"], "BackoffLimitExceeded", "Job has reached the specified backoff limit")


def expected_fate(code, trainer, disrupted=False):
    """The policy tandem's exit codes call for. A trainer releases its workers when it ends
    (they exit 0 and their Jobs complete), so it is restarted only with them: by the JobSet."""
    if code in CANNOT_HELP:
        return "FailJobSet"
    if code in RESUMES or disrupted:
        return "RestartJobSetAndIgnoreMaxRestarts" if trainer else "new pod, not counted"
    return "RestartJobSet" if trainer else "new pod, counted"


def failure_problems(jobset, trainer_group, documented):
    problems = []
    policy = jobset["spec"].get("failurePolicy", {})
    if policy.get("maxRestarts", 0) < 1:
        problems.append("failurePolicy.maxRestarts is 0: one trainer failure ends the job with no resume")
    names = [rj["name"] for rj in jobset["spec"]["replicatedJobs"]]
    for rule in policy.get("rules", []):
        if not RULE_NAME.match(rule["name"]):
            problems.append(f"failurePolicy rule name {rule['name']!r} does not match {RULE_NAME.pattern}")
        for reason in set(rule.get("onJobFailureReasons", [])) - JOB_FAILURE_REASONS:
            problems.append(f"failurePolicy rule {rule['name']}: {reason!r} is no Job failure reason")
        for target in set(rule.get("targetReplicatedJobs", [])) - set(names):
            problems.append(f"failurePolicy rule {rule['name']}: {target!r} is not a replicated job ({names})")
    events = [(c, ()) for c in sorted(set(documented) - {0}) + [137]]
    events += [(75, ((DISRUPTION, "True"),)), (137, ((DISRUPTION, "True"),))]
    for rj in jobset["spec"]["replicatedJobs"]:
        trainer = rj["name"] == trainer_group
        for code, conditions in events:
            got = fate(jobset, rj, code, conditions)
            want = expected_fate(code, trainer, bool(conditions))
            if got != want:
                how = f"exit {code}" + (" after an eviction" if conditions else "")
                problems.append(f"{rj['name']}: a pod that ends with {how} leads to {got!r}, not {want!r}")
    return problems


def pod_failure_policy_problems(jobset, documented):
    problems = []
    for rj in jobset["spec"]["replicatedJobs"]:
        job = rj["template"]["spec"]
        if "podFailurePolicy" not in job:
            continue
        pod = job["template"]["spec"]
        if pod.get("restartPolicy") != "Never":
            problems.append(f"{rj['name']}: a podFailurePolicy requires restartPolicy Never, not {pod.get('restartPolicy')}")
        containers = {c["name"] for c in pod["containers"]}
        for rule in job["podFailurePolicy"]["rules"]:
            codes = rule.get("onExitCodes")
            if bool(codes) == bool(rule.get("onPodConditions")):
                problems.append(f"{rj['name']}: a podFailurePolicy rule needs onExitCodes or onPodConditions, not both")
            if not codes:
                continue
            if codes.get("containerName", next(iter(containers))) not in containers:
                problems.append(f"{rj['name']}: onExitCodes names container {codes['containerName']!r}, not one of {containers}")
            for v in codes["values"]:
                if v == 0 or v not in documented:
                    problems.append(f"{rj['name']}: exit code {v} is not one tandem documents ({sorted(documented)})")
    return problems


# ---- How the objects fit tandem and each other -------------------------------------------

def grace_problems(jobset, trainer_group, stop_grace, term_grace):
    problems = []
    for rj in jobset["spec"]["replicatedJobs"]:
        pod = rj["template"]["spec"]["template"]["spec"]
        args = pod["containers"][0]["args"]
        trainer = rj["name"] == trainer_group
        flag = "--stop-grace" if trainer else "--term-grace"
        grace = float(arg(args, flag, stop_grace if trainer else term_grace))
        if pod.get("terminationGracePeriodSeconds", 30) <= grace:
            problems.append(f"{rj['name']}: terminationGracePeriodSeconds {pod.get('terminationGracePeriodSeconds', 30)} "
                            f"is not longer than {flag} {grace:g}: the kubelet's SIGKILL cuts the stop short")
    return problems


def selects(selector, labels):
    """A LabelSelector against a pod's labels."""
    if not all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        has, value = e["key"] in labels, labels.get(e["key"])
        ok = {"In": has and value in e.get("values", []), "NotIn": not has or value not in e.get("values", []),
              "Exists": has, "DoesNotExist": not has}[e["operator"]]
        if not ok:
            return False
    return True


def network_problems(policies, pods, worker_ports):
    if not policies:
        return ["no NetworkPolicy: any pod in the cluster can reach the workers"]
    problems = []
    strangers = [{JOBSET_KEY + "jobset-name": "another-jobset", JOBSET_KEY + "replicatedjob-name": "trainer"}, {}]
    for pod in pods:
        if not any(selects(np["spec"]["podSelector"], pod["labels"]) for np in policies):
            problems.append(f"no NetworkPolicy selects pod {pod['host']}")
    for np in policies:
        where = f"NetworkPolicy {np['metadata']['name']}"
        if "Ingress" not in np["spec"].get("policyTypes", ["Ingress"]):
            problems.append(f"{where}: does not restrict ingress")
        if any(selects(np["spec"]["podSelector"], s) for s in strangers):
            problems.append(f"{where}: its podSelector takes in pods that are not this JobSet's")
        for rule in np["spec"].get("ingress", []):
            peers = rule.get("from")
            if not peers or any(set(p) != {"podSelector"} for p in peers):
                problems.append(f"{where}: an ingress rule lets in more than pods of this namespace: {peers}")
                continue
            if any(selects(p["podSelector"], s) for p in peers for s in strangers):
                problems.append(f"{where}: an ingress rule lets in pods of another JobSet")
            if not all(any(selects(p["podSelector"], pod["labels"]) for p in peers) for pod in pods):
                problems.append(f"{where}: an ingress rule leaves out some of this JobSet's pods")
            ports = {p.get("port") for p in rule.get("ports", [])}
            if rule.get("ports") and not worker_ports <= ports:
                problems.append(f"{where}: the workers' ports {sorted(worker_ports)} are not among {sorted(ports, key=str)}")
    return problems


def secret_problems(header, containers, jobset_name):
    made = re.search(r"kubectl create secret generic (\S+) --from-literal=([\w.-]+)=", header)
    if not made:
        return ["the header comment has no `kubectl create secret generic NAME --from-literal=KEY=...`"]
    name, key = made.groups()
    problems = [] if name.startswith(jobset_name + "-") else \
        [f"Secret {name}: one name per namespace; derive it from the JobSet's name ({jobset_name}-token)"]
    for c in containers:
        for var in c.get("env", []):
            ref = var.get("valueFrom", {}).get("secretKeyRef")
            if ref and (ref["name"], ref["key"]) != (name, key):
                problems.append(f"{c['name']}: {var['name']} reads Secret {ref['name']}/{ref['key']}, "
                                f"the header creates {name}/{key}")
    return problems


def storage_problems(claims, jobset, trainer_group):
    problems, mounting = [], {}
    for rj in jobset["spec"]["replicatedJobs"]:
        pod = rj["template"]["spec"]["template"]["spec"]
        pods = rj.get("replicas", 1) * rj["template"]["spec"].get("parallelism", 1)
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for v in volumes.values():
            claim = v.get("persistentVolumeClaim", {}).get("claimName")
            if claim is not None:
                mounting[claim] = mounting.get(claim, 0) + pods
                if claim not in claims:
                    problems.append(f"{rj['name']}: claim {claim!r} is not declared in the file ({sorted(claims)})")
        if rj["name"] != trainer_group:
            continue
        c = pod["containers"][0]
        root = arg(c["args"], "--sagemaker-root", "/opt/ml")
        mount = next((m for m in c.get("volumeMounts", []) if m["mountPath"] == root), None)
        if not mount or "persistentVolumeClaim" not in volumes.get(mount["name"], {}):
            problems.append(f"{rj['name']}: --sagemaker-root {root} is not on a PersistentVolumeClaim: "
                            "checkpoints and model.pt die with the pod")
    for claim, count in mounting.items():
        modes = claims.get(claim, {}).get("spec", {}).get("accessModes", [])
        if count > 1 and "ReadWriteMany" not in modes:
            problems.append(f"claim {claim}: {count} pods mount it, which needs ReadWriteMany, not {modes}")
    return problems


def security_problems(name, pod):
    problems, pod_sc = [], pod.get("securityContext", {})
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for c in pod["containers"]:
        sc = {**pod_sc, **c.get("securityContext", {})}
        where = f"{name}/{c['name']}"
        if sc.get("runAsNonRoot") is not True or not sc.get("runAsUser"):
            problems.append(f"{where}: runs as root (runAsNonRoot and a runAsUser other than 0, please)")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: allowPrivilegeEscalation is not false")
        if not sc.get("readOnlyRootFilesystem"):
            continue
        writable = [m["mountPath"] for m in c.get("volumeMounts", []) if not m.get("readOnly")]
        if not any(m["mountPath"] == "/tmp" and "emptyDir" in volumes.get(m["name"], {})
                   for m in c.get("volumeMounts", [])):
            problems.append(f"{where}: a read-only root filesystem needs an emptyDir on /tmp")
        home = next((v.get("value") for v in c.get("env", []) if v["name"] == "HOME"), None)
        if home is None or not any(home == w or home.startswith(w + "/") for w in writable):
            problems.append(f"{where}: HOME ({home}) is not on a writable volume: Torch's caches would fail")
    return problems


def placement_problems(name, pod, wants_gpu):
    tolerates = any(t.get("key") == "nvidia.com/gpu" and t.get("effect") in (None, "NoSchedule")
                    for t in pod.get("tolerations", []))
    if wants_gpu:
        return [] if tolerates else [f"{name}: asks for nvidia.com/gpu but does not tolerate the nvidia.com/gpu taint"]
    terms = pod.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution",
                                                                {}).get("nodeSelectorTerms", [])
    gpu_node = {"nvidia.com/gpu.present": "true"}
    off_gpu = terms and not any(selects({"matchExpressions": t.get("matchExpressions", [])}, gpu_node) for t in terms)
    problems = [] if off_gpu else [f"{name}: nothing keeps these CPU pods off GPU nodes (nvidia.com/gpu.present)"]
    if tolerates:
        problems.append(f"{name}: tolerates the nvidia.com/gpu taint: CPU pods would take GPU nodes")
    return problems


def probe_problems(name, container):
    ports = {p["containerPort"] for p in container.get("ports", [])}
    grpc = container.get("readinessProbe", {}).get("grpc")
    if not grpc:
        return [f"{name}: no gRPC readinessProbe, although workers serve grpc.health.v1"]
    if grpc["port"] not in ports or grpc.get("service", "") != "":
        return [f"{name}: the readinessProbe asks {grpc} of a worker that serves the health service '' on {ports}"]
    return []
