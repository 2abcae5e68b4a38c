package io.opentelemetry.sdk.trace;

/** Stand-in for the OpenTelemetry SDK's ReadWriteSpan. */
public interface ReadWriteSpan extends ReadableSpan {}
