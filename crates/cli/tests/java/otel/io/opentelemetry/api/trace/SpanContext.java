package io.opentelemetry.api.trace;

/** Stand-in for the OpenTelemetry API's SpanContext (the part the docs' example uses). */
public interface SpanContext {
    String getTraceId();

    String getSpanId();
}
