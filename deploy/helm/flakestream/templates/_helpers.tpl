{{/* Names, labels and the pieces every pod shares. */}}

{{- define "flakestream.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "flakestream.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "flakestream.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "flakestream.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "flakestream.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flakestream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of one component: (dict "root" $ "component" "worker"). */}}
{{- define "flakestream.componentLabels" -}}
{{ include "flakestream.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "flakestream.componentSelector" -}}
{{ include "flakestream.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "flakestream.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "flakestream.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "flakestream.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
flakestream.configFile renders one command's --config file: common.config,
the command's own config over it, then the keys the chart sets. It refuses
keys the chart owns and anything that would put a password into the
ConfigMap. Arguments: (dict "root" $ "name" "worker" "config" map
"reserved" list "set" map "redis" bool).
*/}}
{{- define "flakestream.configFile" -}}
{{- $root := .root -}}
{{- $name := .name -}}
{{- range $source, $m := dict "common" $root.Values.common.config $name .config -}}
{{- range $key, $value := $m -}}
{{- if has $key $.reserved -}}
{{- fail (printf "%s.config.%s: the chart sets %s itself; remove it (see values.yaml)" $source $key $key) -}}
{{- end -}}
{{- if regexMatch "(?i)password|secret|passphrase|credential|(^|-)token$" $key -}}
{{- fail (printf "%s.config.%s: a password or secret never goes into the ConfigMap; put it in the Secret named by secret.name (see secret.* in values.yaml)" $source $key) -}}
{{- end -}}
{{- range $v := (kindIs "slice" $value | ternary $value (list $value)) -}}
{{- if and (kindIs "string" $v) (or (regexMatch "://[^/@?#]*:[^@]*@" $v) (regexMatch "(?i)[?&][^=&]*(password|secret|passphrase|token)[^=&]*=[^&]" $v)) -}}
{{- fail (printf "%s.config.%s: the URL has a password in it (user:password@ or a password= parameter such as sentinel_password); put the URL in the Secret (secret.redisURLKey) or the password there (secret.schemaRegistryPasswordKey)" $source $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $cfg := mergeOverwrite (deepCopy $root.Values.common.config) (deepCopy .config) .set -}}
{{- if and .redis $root.Values.secret.name $root.Values.secret.redisURLKey -}}
{{- $_ := unset $cfg "redis" -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
flakestream.secretEnv: the FLAKESTREAM_* variables read from the existing
Secret. Arguments: (dict "root" $ "redis" bool).
*/}}
{{- define "flakestream.secretEnv" -}}
{{- $s := .root.Values.secret -}}
{{- if and (not $s.name) (or $s.saslPasswordKey $s.redisURLKey $s.schemaRegistryPasswordKey $s.oauthClientSecretKey) -}}
{{- fail "secret.*Key is set but secret.name is not: name the existing Secret that holds the keys" -}}
{{- end -}}
{{- if $s.name -}}
{{- $vars := list (list "FLAKESTREAM_SASL_PASSWORD" $s.saslPasswordKey) (list "FLAKESTREAM_SCHEMA_REGISTRY_PASSWORD" $s.schemaRegistryPasswordKey) (list "FLAKESTREAM_SASL_OAUTH_CLIENT_SECRET" $s.oauthClientSecretKey) -}}
{{- if .redis -}}
{{- $vars = append $vars (list "FLAKESTREAM_REDIS" $s.redisURLKey) -}}
{{- end -}}
{{- range $vars -}}
{{- if index . 1 }}
- name: {{ index . 0 }}
  valueFrom:
    secretKeyRef:
      name: {{ $s.name }}
      key: {{ index . 1 }}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The pod-level settings every component shares: (dict "root" $ "c" .Values.worker). */}}
{{- define "flakestream.podCommon" -}}
serviceAccountName: {{ include "flakestream.serviceAccountName" .root }}
automountServiceAccountToken: false
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The config volume: (dict "root" $ "file" "worker.yaml" "c" .Values.worker). */}}
{{- define "flakestream.volumes" -}}
volumes:
  - name: config
    configMap:
      name: {{ include "flakestream.fullname" .root }}-config
      items:
        - key: {{ .file }}
          path: {{ .file }}
{{- with .c.extraVolumes }}
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "flakestream.volumeMounts" -}}
volumeMounts:
  - name: config
    mountPath: /etc/flakestream/config
    readOnly: true
{{- with .c.extraVolumeMounts }}
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
flakestream.lanes: the worker's --lanes as the chart renders it, from
worker.config.lanes: a number as given, or auto (the default). With an
autoscaler on, auto becomes min(4, autoscaling.inputPartitions ÷
maxReplicas), so that at maxReplicas every lane has a partition (the worker's
own auto counts only its cores and the partitions, not the other pods; 4 is
its cap). Anything else fails the render.
*/}}
{{- define "flakestream.lanes" -}}
{{- $c := default (dict) .Values.worker.config -}}
{{- $v := "auto" -}}
{{- if hasKey $c "lanes" -}}
{{- $v = toString (index $c "lanes") -}}
{{- end -}}
{{- $a := .Values.autoscaling -}}
{{- if eq $v "auto" -}}
{{- if and (or $a.keda.enabled $a.hpa.enabled) (ge (int $a.inputPartitions) 1) (ge (int $a.maxReplicas) 1) -}}
{{- min 4 (max 1 (div (int $a.inputPartitions) (int $a.maxReplicas))) -}}
{{- else -}}
auto
{{- end -}}
{{- else if regexMatch "^[1-9][0-9]*$" $v -}}
{{- $v -}}
{{- else -}}
{{- fail (printf "worker.config.lanes %q: want auto or a number of at least 1" $v) -}}
{{- end -}}
{{- end -}}

{{/* flakestream.scalingCheck fails the render on autoscaling values that cannot work. */}}
{{- define "flakestream.scalingCheck" -}}
{{- $a := .Values.autoscaling -}}
{{- if and $a.keda.enabled $a.hpa.enabled -}}
{{- fail "autoscaling: keda.enabled and hpa.enabled both set; choose one" -}}
{{- end -}}
{{- if or $a.keda.enabled $a.hpa.enabled -}}
{{- if lt (int $a.inputPartitions) 1 -}}
{{- fail "autoscaling.inputPartitions: set it to the input topics' partitions (added up); maxReplicas may not exceed it" -}}
{{- end -}}
{{- $lanes := int (include "flakestream.lanes" .) -}}
{{- if gt (mul (int $a.maxReplicas) $lanes) (int $a.inputPartitions) -}}
{{- if gt $lanes 1 -}}
{{- fail (printf "autoscaling.maxReplicas %d × worker.config.lanes %d is larger than autoscaling.inputPartitions %d: each lane is a group member, and a member beyond the partitions has nothing to read" (int $a.maxReplicas) $lanes (int $a.inputPartitions)) -}}
{{- end -}}
{{- fail (printf "autoscaling.maxReplicas %d is larger than autoscaling.inputPartitions %d: a worker beyond the partitions has nothing to read" (int $a.maxReplicas) (int $a.inputPartitions)) -}}
{{- end -}}
{{- if gt (int $a.minReplicas) (int $a.maxReplicas) -}}
{{- fail (printf "autoscaling.minReplicas %d is larger than maxReplicas %d" (int $a.minReplicas) (int $a.maxReplicas)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
