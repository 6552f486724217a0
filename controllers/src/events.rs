//! [`Recorder`]: the events a controller records about the objects it manages, as
//! kube-controller-manager's event recorders write them (core/v1 Events with the controller as
//! source), correlated (repeats counted, similar ones combined, spam dropped) and queued on the
//! manager's shared [`EventSink`].

use api::event_sink::EventSink;
use chrono::Utc;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};

/// One controller's event recorder (cheap to clone).
#[derive(Clone, Debug)]
pub struct Recorder {
    sink: EventSink,
    /// `source.component`, e.g. `replicaset-controller`.
    component: &'static str,
}

impl Recorder {
    pub fn new(sink: EventSink, component: &'static str) -> Recorder {
        Recorder { sink, component }
    }

    /// Records a Normal (or, with `warning`, Warning) event about `object` in its namespace.
    pub fn record(&self, object: ObjectReference, warning: bool, reason: &str, message: &str) {
        let now = Utc::now();
        let stamp = api::event_correlator::timestamp(now);
        // Events about cluster-scoped objects (volumes, nodes) live in `default`, as upstream's
        // recorders put them.
        let namespace = object
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into());
        let name = object.name.clone().unwrap_or_default();
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{name}.{:x}",
                    now.timestamp_nanos_opt().unwrap_or_default() as u64
                        ^ u64::from(rand::random::<u32>())
                )),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            involved_object: object,
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some(if warning { "Warning" } else { "Normal" }.into()),
            count: Some(1),
            first_timestamp: Some(Time(stamp)),
            last_timestamp: Some(Time(stamp)),
            event_time: Some(MicroTime(stamp)),
            source: Some(EventSource {
                component: Some(self.component.into()),
                host: None,
            }),
            reporting_component: Some(self.component.into()),
            reporting_instance: Some(self.component.into()),
            ..Default::default()
        };
        self.sink.record_event(event);
    }
}

/// The reference an event names: the object's kind, apiVersion, name, namespace, uid and
/// resourceVersion.
pub fn reference(
    api_version: &str,
    kind: &str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..Default::default()
    }
}

/// An API error as Go prints it in an event message: the server's `Status` message alone.
pub fn error_text(error: &api::client::ClientError) -> String {
    match error {
        api::client::ClientError::Api { message, .. } => message.clone(),
        other => other.to_string(),
    }
}
