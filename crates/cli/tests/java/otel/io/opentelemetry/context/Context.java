package io.opentelemetry.context;

/** Stand-in for the OpenTelemetry API's Context (the part the docs' example uses). */
public interface Context {}
