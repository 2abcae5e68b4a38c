package io.opentelemetry.sdk.trace;

import io.opentelemetry.api.trace.SpanContext;

/** Stand-in for the OpenTelemetry SDK's ReadableSpan (the part the docs' example uses). */
public interface ReadableSpan {
    SpanContext getSpanContext();

    boolean hasEnded();
}
