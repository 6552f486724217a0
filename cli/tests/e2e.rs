//! kemu's end-to-end tests: real kemu processes on loopback (and in network namespaces), driven
//! through the real kubectl, the official Python client, kube-rs and kemu's own commands. One
//! test binary, so the workspace links the whole of kemu once for them; `cargo test -p kemu
//! --test e2e kubectl::` runs one file's tests.

mod common;

mod apiserver_replicas;
mod authz;
mod autoscaling;
mod bench_apiserver;
mod bench_store;
mod chaos;
mod cl2;
mod controllers;
mod crd_garbage_collection;
mod crd_rules;
mod crds;
mod daemonsets_cronjobs;
mod disruption;
mod kube_controller;
mod kube_rs;
mod kubectl;
mod kubectl_admission;
mod kubectl_create;
mod kubectl_exec;
mod kubectl_fidelity;
mod kubectl_managed_fields;
mod launcher;
mod load;
mod metadata_reads;
mod node_host;
mod openapi;
mod python_client;
mod render;
mod scheduler;
mod service_accounts;
mod statefulsets;
mod storage_api;
mod store_cluster;
mod store_durability;
mod volume_binding;
mod volumes;
