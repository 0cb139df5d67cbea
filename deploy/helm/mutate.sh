#!/usr/bin/env bash
# Shows that each assertion of the chart's tests can fail: every line below
# breaks the chart in one way (sed), runs the test that should catch it, and
# puts the file back (git checkout). Each must print "FAIL as it should".
#
#   deploy/helm/mutate.sh        (about a minute with a warm build cache)
#
# It refuses to run when the chart has uncommitted changes, which the
# checkout would throw away.
set -uo pipefail
cd "$(dirname "$0")"
if ! git diff --quiet -- flakestream; then
  echo "mutate.sh: deploy/helm/flakestream has uncommitted changes; commit or stash them first" >&2
  exit 2
fi
T=flakestream/templates
bad=0
run() {
  local name=$1 file=$2 expr=$3 tests=$4 out
  sed -i "$expr" "$file"
  if git diff --quiet -- "$file"; then echo "BREAK $name: sed changed nothing"; bad=1; return; fi
  out=$(go test -count=1 -run "$tests" . 2>&1)
  git checkout -q -- "$file"
  if echo "$out" | grep -q '^FAIL'; then
    echo "BREAK $name: FAIL as it should:"
    echo "$out" | grep -E '^\s+(chart|flags|render|keda)_test.go:[0-9]+:' | head -1 | cut -c1-240
  else
    echo "BREAK $name: still PASSES"; bad=1
  fi
}
run instance-id $T/worker-statefulset.yaml 's/fieldPath: metadata.name/fieldPath: metadata.uid/' 'TestInstanceIDFromPodName'
run grace $T/worker-statefulset.yaml 's/terminationGracePeriodSeconds: {{ $w.terminationGracePeriodSeconds }}/terminationGracePeriodSeconds: 10/' 'TestGracePeriodAboveShutdownTimeout'
run password-guard $T/_helpers.tpl 's/{{- if contains "password" $key -}}/{{- if contains "passwordXX" $key -}}/' 'TestNoSecretInConfigMaps|TestRenderRefuses'
run secret-env $T/_helpers.tpl 's/    secretKeyRef:/    configMapKeyRef:/' 'TestNoSecretInConfigMaps'
run rules $T/prometheusrule.yaml 's/{{- $rules | nindent 2 }}/{{- $rules | replace "severity: critical" "severity: warning" | nindent 2 }}/' 'TestPrometheusRuleIsTheRulesFile'
run flag-key flakestream/values.yaml 's/    txn-timeout: 10s/    txn-timeout: 10s\n    max-poll-record: 5000/' 'TestFlagsExist'
run flag-arg $T/worker-statefulset.yaml 's|args: \["run", "--config"|args: ["run", "--no-such-flag", "2", "--config"|' 'TestFlagsExist'
run flag-env $T/audit-deployment.yaml 's/(dict "root" . "redis" false) | trim/(dict "root" . "redis" true) | trim/' 'TestFlagsExist'
run strict-core $T/worker-statefulset.yaml 's/      terminationGracePeriodSeconds: {{/      terminationGracePeriod: 30\n      terminationGracePeriodSeconds: {{/' 'TestRender'
run strict-keda $T/keda-scaledobject.yaml 's/  cooldownPeriod:/  coolDownPeriod:/' 'TestRender'
run type-keda $T/keda-scaledobject.yaml 's/  maxReplicaCount: {{ $a.maxReplicas }}/  maxReplicaCount: "{{ $a.maxReplicas }}"/' 'TestRender'
run strict-monitoring $T/servicemonitor.yaml 's/      interval: {{ $m.serviceMonitor.interval }}/      scrapeInterval: {{ $m.serviceMonitor.interval }}/' 'TestRender'
run keda-max $T/_helpers.tpl 's/{{- if gt (int $a.maxReplicas) (int $a.inputPartitions) -}}/{{- if false -}}/' 'TestRenderRefuses'
run keda-max-so $T/keda-scaledobject.yaml 's/  maxReplicaCount: {{ $a.maxReplicas }}/  maxReplicaCount: 9/' 'TestScaledObject'
run readonly flakestream/values.yaml 's/  readOnlyRootFilesystem: true/  readOnlyRootFilesystem: false/' 'TestPods'
run probe $T/audit-deployment.yaml 's|path: /readyz|path: /healthz|' 'TestPods'
run image $T/_helpers.tpl 's/(default .Chart.AppVersion .Values.image.tag)/"latest"/' 'TestImageFromAppVersion'
run dashboard $T/grafana-dashboard.yaml 's/{{ $g.label }}: {{ $g.labelValue | quote }}/grafana_dashboards: "1"/' 'TestPrometheusRuleIsTheRulesFile'
run lint flakestream/Chart.yaml 's/^name: flakestream/name: Flakestream_Chart/' 'TestLint'
exit $bad
